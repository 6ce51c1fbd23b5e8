#!/usr/bin/env node
/**
 * Builds the /demo page of `densewire serve`: bundles demo/demo.ts (with the library's table decoders
 * from src/ and their dependencies) into one minified demo.js with esbuild, next to index.html.
 *
 *   node demo/build.mjs            writes ../python/src/densewire/_server/static/demo/ (committed)
 *   node demo/build.mjs OUTDIR     writes OUTDIR (ci.sh builds to a temporary folder and diffs it
 *                                  against the committed files, so a stale bundle fails CI)
 */
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = resolve(process.argv[2] ?? join(here, "..", "..", "python", "src", "densewire", "_server", "static", "demo"));
mkdirSync(outdir, { recursive: true });

await build({
  entryPoints: [join(here, "demo.ts")],
  outfile: join(outdir, "demo.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  minify: true,
  legalComments: "eof",
  sourcemap: false,
  charset: "utf8",
  logLevel: "warning",
  // the bundle must be the same bytes on every machine: no absolute paths, no timestamps
  absWorkingDir: resolve(here, ".."),
});
copyFileSync(join(here, "index.html"), join(outdir, "index.html"));
console.log(`demo built into ${outdir}`);
