// The console's wire types, generated from the API's one schema (src/api/openapi.json)
// by openapi-typescript (a pinned devDependency) into src/wire.gen.ts; web/src/api.ts names them.
//
//   npm run wire-types            rewrite src/wire.gen.ts from src/api/openapi.json
//   npm run wire-types -- --check exit 1 if src/wire.gen.ts is not what the schema gives
//
// The generated file is checked in rather than made at build time: a change to the schema shows
// up in review as a diff of the types the console compiles against, and the console's code can be
// read (and type-checked by an editor) without running the generator first. What keeps it honest
// is src/wire.test.ts (ctest console.unit), which fails when the file differs from what this
// script gives for the current openapi.json; STARFORGE_OPENAPI names another schema (that test's
// own check that it catches a stale file).
import { readFile, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const web = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const schemaPath = resolve(web, "../src/api/openapi.json");
export const outputPath = resolve(web, "src/wire.gen.ts");

const header = `// GENERATED from src/api/openapi.json by openapi-typescript (web/scripts/wire-types.mjs):
// do not edit. Regenerate with \`npm run wire-types\` in web/; src/wire.test.ts fails when stale.
`;

// The schema the console is generated from: STARFORGE_OPENAPI, else src/api/openapi.json.
export function currentSchema() {
  return process.env.STARFORGE_OPENAPI || schemaPath;
}

// The TypeScript that openapi-typescript makes of `schema`: a path, or the parsed document.
export async function generate(schema = currentSchema()) {
  const input = typeof schema === "string" ? pathToFileURL(resolve(schema)) : schema;
  return header + astToString(await openapiTS(input, { enumValues: false }));
}

// The parsed schema at `path`.
export async function readSchema(path = currentSchema()) {
  return JSON.parse(await readFile(path, "utf8"));
}

// The checked-in file and what the generator gives now, for a comparison.
export async function compare(schema) {
  const [actual, expected] = await Promise.all([readFile(outputPath, "utf8").catch(() => ""), generate(schema)]);
  return { actual, expected };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--check")) {
    const { actual, expected } = await compare();
    if (actual !== expected) {
      console.error(`${outputPath} is stale: run \`npm run wire-types\` in web/`);
      process.exit(1);
    }
    console.log(`${outputPath} is up to date`);
  } else {
    await writeFile(outputPath, await generate());
    console.log(`wrote ${outputPath}`);
  }
}
