/* The pod sandbox ("pause") process of StarForge's local nodes (tools/k8s/node): holds the pod's
 * namespaces, reaps the children it inherits, exits on TERM/INT. The same job as Kubernetes'
 * build/pause/linux/pause.c, written here because no registry is reachable to pull
 * registry.k8s.io/pause. Built with `gcc -static` into a one-file image (tools/k8s/node/oci-image). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction sa = {0};
  sa.sa_handler = stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  for (;;) pause();
  return 1;
}
