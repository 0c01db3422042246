// wire.gen.ts is what openapi-typescript makes of src/api/openapi.json now: a schema change
// without `npm run wire-types` (web/scripts/wire-types.mjs) fails here, in ctest console.unit.
// STARFORGE_OPENAPI=<file> compares against another schema instead (how this test was shown to
// catch a stale file).
import { describe, expect, it } from "vitest";
import { compare, generate, outputPath, readSchema } from "../scripts/wire-types.mjs";

describe("wire.gen.ts", () => {
  it("is what the generator gives for the current openapi.json", async () => {
    const { actual, expected } = await compare();
    if (actual !== expected) {
      // The first differing line, then the whole diff from vitest.
      const a = actual.split("\n");
      const e = expected.split("\n");
      const i = e.findIndex((line, n) => line !== a[n]);
      expect.fail(
        `${outputPath} is stale: run \`npm run wire-types\` in web/ and commit it.\n` +
          `first difference at line ${i + 1}:\n  checked in: ${a[i] ?? "(end of file)"}\n  generated:  ${e[i] ?? "(end of file)"}`,
      );
    }
    expect(actual).toBe(expected);
  }, 60_000);

  it("would be stale after a change to the schema (one more field of Job)", async () => {
    const schema = await readSchema();
    schema.components.schemas.Job.properties = { ...schema.components.schemas.Job.properties, probeField: { type: "string" } };
    const changed = await generate(schema);
    expect(changed).toContain("probeField?: string;");
    expect(changed).not.toBe((await compare()).actual);
  }, 60_000);
});
