// Files imported as text (Vite's ?raw): the examples offered as templates, the JobSpec reference.
declare module "*?raw" {
  const text: string;
  export default text;
}
