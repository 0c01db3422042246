// Command s3sigpeer is the test suite's S3 server that checks signatures: gofakes3 (rclone's
// fork, github.com/rclone/gofakes3, MIT), which verifies AWS Signature Version 4 on every request —
// the Authorization header and presigned query strings, with their expiry — around an in-memory
// backend. It complements s3rver (tools/s3peer/s3peer.js), which accepts any signature.
//
//	s3sigpeer --port-file FILE --access-key ID --secret-key SECRET [--bucket NAME]...
//	          [--region REGION] [--address IP] [--port N] [--log FILE]
//	          [--tls-cert FILE --tls-key FILE]
//
// On top of gofakes3 it does what AWS S3 does and gofakes3 does not (docs/object-storage.md):
//   - a request signed for another region than --region (default us-east-1) is refused with
//     AuthorizationHeaderMalformed (header) or AuthorizationQueryParametersError (presigned),
//     naming the expected region, as S3 does;
//   - a body whose SHA-256 differs from the signed x-amz-content-sha256 is refused with
//     XAmzContentSHA256Mismatch.
//
// Writes the port to FILE (atomically, once it listens); with --log appends "METHOD URL
// CONTENT-LENGTH" per request, the format of s3peer.js. Exits on SIGTERM/SIGINT and when its
// parent process dies (a crashed test must not leave servers behind).
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rclone/gofakes3"
	"github.com/rclone/gofakes3/s3mem"
)

type buckets []string

func (b *buckets) String() string     { return strings.Join(*b, ",") }
func (b *buckets) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var names buckets
	portFile := flag.String("port-file", "", "write the listening port here (required)")
	accessKey := flag.String("access-key", "", "the one access key id accepted (required)")
	secretKey := flag.String("secret-key", "", "its secret access key (required)")
	region := flag.String("region", "us-east-1", "the region requests must be signed for")
	address := flag.String("address", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on (0: any free port)")
	logFile := flag.String("log", "", "append one line per request here")
	tlsCert := flag.String("tls-cert", "", "serve https with this certificate (PEM)")
	tlsKey := flag.String("tls-key", "", "and this private key (PEM)")
	flag.Var(&names, "bucket", "create this bucket (repeatable)")
	flag.Parse()
	if *portFile == "" || *accessKey == "" || *secretKey == "" {
		fmt.Fprintln(os.Stderr, "s3sigpeer: --port-file, --access-key and --secret-key are required")
		os.Exit(2)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(os.Stderr, "s3sigpeer: --tls-cert and --tls-key go together")
		os.Exit(2)
	}

	backend := s3mem.New()
	for _, name := range names {
		if err := backend.CreateBucket(context.Background(), name); err != nil {
			log.Fatalf("s3sigpeer: bucket %q: %v", name, err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithV4Auth(map[string]string{*accessKey: *secretKey}))
	var handler http.Handler = faker.Server()
	handler = checkPayloadHash(handler)
	handler = checkRegion(*region, handler)
	if *logFile != "" {
		handler = logRequests(*logFile, handler)
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(*address, strconv.Itoa(*port)))
	if err != nil {
		log.Fatalf("s3sigpeer: listen: %v", err)
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		var err error
		if *tlsCert != "" {
			err = server.ServeTLS(ln, *tlsCert, *tlsKey)
		} else {
			err = server.Serve(ln)
		}
		if err != nil && err != http.ErrServerClosed {
			log.Fatalf("s3sigpeer: serve: %v", err)
		}
	}()
	tmp := *portFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", ln.Addr().(*net.TCPAddr).Port)), 0o644); err != nil {
		log.Fatalf("s3sigpeer: %v", err)
	}
	if err := os.Rename(tmp, *portFile); err != nil {
		log.Fatalf("s3sigpeer: %v", err)
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	parent := os.Getppid()
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			if os.Getppid() != parent { // re-parented: whoever started us is gone
				return
			}
		}
	}
}

// s3Error writes an S3 error document, as AWS does.
func s3Error(w http.ResponseWriter, status int, code, message string, extra ...string) {
	// Only &, < and > are escaped, as AWS does: its messages carry literal apostrophes.
	escape := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	var b bytes.Buffer
	b.WriteString(xml.Header + "<Error><Code>" + code + "</Code><Message>" + escape(message) + "</Message>")
	for i := 0; i+1 < len(extra); i += 2 {
		b.WriteString("<" + extra[i] + ">" + escape(extra[i+1]) + "</" + extra[i] + ">")
	}
	b.WriteString("</Error>")
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// <access key>/<date>/<region>/s3/aws4_request, in the header or the presigned query.
var scopeRegion = regexp.MustCompile(`^[^/]*/[0-9]{8}/([^/]*)/`)

// checkRegion refuses requests signed for another region. AWS answers 400
// AuthorizationHeaderMalformed ("the region 'x' is wrong; expecting 'y'") with the expected
// <Region>; gofakes3 derives the signing key from whatever region the client names.
func checkRegion(region string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		credential, presigned := r.URL.Query().Get("X-Amz-Credential"), true
		if auth := r.Header.Get("Authorization"); auth != "" {
			presigned = false
			credential = ""
			if i := strings.Index(auth, "Credential="); i >= 0 {
				credential = strings.TrimSpace(strings.SplitN(auth[i+len("Credential="):], ",", 2)[0])
			}
		}
		if m := scopeRegion.FindStringSubmatch(credential); m != nil && m[1] != region {
			if presigned {
				s3Error(w, http.StatusBadRequest, "AuthorizationQueryParametersError",
					fmt.Sprintf("Error parsing the X-Amz-Credential parameter; the region '%s' is wrong; expecting '%s'", m[1], region),
					"Region", region)
			} else {
				s3Error(w, http.StatusBadRequest, "AuthorizationHeaderMalformed",
					fmt.Sprintf("The authorization header is malformed; the region '%s' is wrong; expecting '%s'", m[1], region),
					"Region", region)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkPayloadHash refuses a body whose SHA-256 is not the signed x-amz-content-sha256, as S3
// does (gofakes3 signs over the header's value without hashing the body).
func checkPayloadHash(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claimed := r.Header.Get("X-Amz-Content-Sha256")
		if !hexSHA256.MatchString(claimed) || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s3Error(w, http.StatusBadRequest, "IncompleteBody", err.Error())
			return
		}
		sum := sha256.Sum256(body)
		if got := hex.EncodeToString(sum[:]); got != claimed {
			s3Error(w, http.StatusBadRequest, "XAmzContentSHA256Mismatch",
				"The provided 'x-amz-content-sha256' header does not match what was computed.",
				"ClientComputedContentSHA256", claimed, "S3ComputedContentSHA256", got)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func logRequests(path string, next http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		length := r.Header.Get("Content-Length")
		if length == "" {
			length = "0"
		}
		mu.Lock()
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s %s %s\n", r.Method, r.URL.RequestURI(), length)
			f.Close()
		}
		mu.Unlock()
		next.ServeHTTP(w, r)
	})
}
