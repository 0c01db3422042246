// Types of wire-types.mjs for src/wire.test.ts (the console's tsconfig checks no JavaScript).
export const schemaPath: string;
export const outputPath: string;
export function currentSchema(): string;
export function generate(schema?: string | object): Promise<string>;
export function readSchema(path?: string): Promise<{ components: { schemas: Record<string, { properties?: Record<string, unknown> }> } }>;
export function compare(schema?: string): Promise<{ actual: string; expected: string }>;
