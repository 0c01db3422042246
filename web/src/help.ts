// The console's help pages (/help/<name>): sections of the repository's documents, cut at build
// time by vite.config.ts and served by forge with the console, so a "not configured" or a
// "see the reference" is a link to a page this server has, not a path to a file.
import playgroundLocal from "../../docs/playground.md?raw";
import kuberayFleet from "../../docs/kuberay-fleet.md?raw";
import kuberaySettings from "../../docs/settings.md?raw";
import readme from "../../README.md?raw";

export interface HelpPage {
  title: string;
  id: string; // the <pre>'s id
  text: string;
  from: string; // where it comes from, said under the title
  crumb: [string, string]; // the page it is reached from: path, name
}

export const HELP: Record<string, HelpPage> = {
  jobspec: {
    title: "JobSpec reference",
    id: "jobspec-reference",
    text: readme.replace(/^## JobSpec v1\n+/, ""),
    from: "The README's \"JobSpec v1\" section.",
    crumb: ["/submit", "Submit"],
  },
  "kuberay-fleet": {
    title: "Setting up the kuberay fleet",
    id: "kuberay-fleet-help",
    // "(below)" in the section points further down its document, which this page does not have.
    text: `${kuberayFleet.replace(/^### .*\n+/, "").replaceAll("(below)", '(docs/kuberay-fleet.md, "Restart safety and orphans")')}\n\nAll of a cluster's settings, as forge serve reads them:\n\n${kuberaySettings.replace(/^## .*\n+/, "")}`,
    from: "docs/kuberay-fleet.md (\"When forge serve runs it\") and docs/settings.md (\"Example: a KubeRay cluster\").",
    crumb: ["/capacity", "Capacity"],
  },
  "local-playgrounds": {
    title: "Playgrounds on the local fleet",
    id: "local-playgrounds-help",
    text: playgroundLocal.replace(/^## .*\n+/, ""),
    from: "docs/playground.md (\"On the local fleet\").",
    crumb: ["/playgrounds", "Playgrounds"],
  },
};

// The help page that says how to set up `fleet` ("" when there is none).
export function fleetHelp(fleet: string, what: "jobs" | "playgrounds"): string {
  if (fleet === "kuberay") return "/help/kuberay-fleet";
  if (fleet === "local" && what === "playgrounds") return "/help/local-playgrounds";
  return "";
}
