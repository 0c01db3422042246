// What the Submit page offers to start from: the repository's examples, their code included (so
// a first job needs no folder). The JobSpec reference is a help page (help.ts).
import tinyTrainSpec from "../../examples/tiny-train/job.yaml?raw";
import tinyTrainPy from "../../examples/tiny-train/train.py?raw";

export interface Example {
  id: string;
  title: string;
  spec: string;
  files: Record<string, string>; // the code, by path
}

export const BLANK_SPEC = `name: my-job
fleet: local
image: python:3.11-slim   # for fleets that run containers
entrypoint: python3 train.py
pools:
  - name: main
    cpusPerMachine: 1
`;

export const EXAMPLES: Example[] = [
  {
    id: "tiny-train",
    title: "tiny-train: a small training loop that draws its loss and accuracy curves",
    spec: tinyTrainSpec,
    files: { "train.py": tinyTrainPy },
  },
  {
    id: "hello",
    title: "hello: one line of Python",
    spec: `name: hello
fleet: local
image: python:3.11-slim
entrypoint: python3 hello.py
pools:
  - name: main
    cpusPerMachine: 1
`,
    files: { "hello.py": 'print("hello from StarForge")\n' },
  },
];
