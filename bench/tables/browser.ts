/** The Chromium side of bench/tables: the same cases, run in the page (bundled by bench.mjs). */
import { CASES, type CaseContext, type Stats, runCases } from "./cases.js";

declare global {
  interface Window {
    benchRun(opts: { warmup: number; iterations: number; rounds: number }): Promise<{ stats: Stats[]; isolated: boolean; userAgent: string }>;
  }
}

window.benchRun = async (opts) => {
  const paths = (await (await fetch("/bodies.json")).json()) as Record<string, string>;
  const ctx = { columns: await (await fetch("/columns.json")).json() } as CaseContext;
  const bodies: Record<string, Uint8Array> = {};
  for (const [k, p] of Object.entries(paths)) bodies[k] = new Uint8Array(await (await fetch(`/${p}`)).arrayBuffer());
  const stats = await runCases(CASES, bodies, ctx, { ...opts, now: () => performance.now() });
  return { stats, isolated: crossOriginIsolated, userAgent: navigator.userAgent };
};
