/** The Node side of bench/tables (bundled by bench.mjs with esbuild, then imported). */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { decodeTableSync } from "../../typescript/src/index.js";
import { CASES, type CaseContext, type Stats, baselineBodies, runCases } from "./cases.js";

export { CASES };

/** Every body of the bench by key (TABLE.FORMAT) -> path relative to the output folder. */
export function bodyPaths(dir: string): Record<string, string> {
  return JSON.parse(readFileSync(join(dir, "bodies.json"), "utf8")) as Record<string, string>;
}

/** Builds the row baselines from the decoded densewire Protobuf bodies; writes bodies.json. */
export async function makeBaselines(dir: string): Promise<Record<string, string>> {
  const read = (name: string) => new Uint8Array(readFileSync(join(dir, "densewire", name)));
  const points = decodeTableSync(read("points.protobuf"), "protobuf");
  const pointsF32 = decodeTableSync(read("points_f32.protobuf"), "protobuf");
  mkdirSync(join(dir, "baseline"), { recursive: true });
  const paths: Record<string, string> = {};
  for (const [key, body] of Object.entries(baselineBodies(points, pointsF32))) {
    writeFileSync(join(dir, "baseline", key), body);
    paths[key] = `baseline/${key}`;
  }
  for (const table of ["points", "points_f32"]) {
    for (const f of ["json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"]) paths[`${table}.${f}`] = `densewire/${table}.${f}`;
  }
  writeFileSync(join(dir, "bodies.json"), JSON.stringify(paths, null, 2));
  writeFileSync(
    join(dir, "columns.json"),
    JSON.stringify({
      points: readFileSync(join(dir, "densewire", "points.columns"), "utf8"),
      points_f32: readFileSync(join(dir, "densewire", "points_f32.columns"), "utf8"),
    }),
  );
  return paths;
}

export async function nodeBench(dir: string, opts: { warmup: number; iterations: number; rounds: number }): Promise<Stats[]> {
  const paths = bodyPaths(dir);
  const bodies: Record<string, Uint8Array> = {};
  for (const [k, p] of Object.entries(paths)) bodies[k] = new Uint8Array(readFileSync(join(dir, p)));
  const ctx = { columns: JSON.parse(readFileSync(join(dir, "columns.json"), "utf8")) } as CaseContext;
  const gc = (globalThis as { gc?: () => void }).gc;
  return await runCases(CASES, bodies, ctx, { ...opts, now: () => performance.now(), gc, log: (s) => console.error(`node: ${s}`) });
}
