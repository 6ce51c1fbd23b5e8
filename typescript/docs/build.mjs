#!/usr/bin/env node
/**
 * Builds /docs of `densewire serve`: Swagger UI from the npm package swagger-ui-dist (a devDependency,
 * pinned by package-lock.json), its licence, and this folder's index.html and init.js, copied into
 * the Python package so that the page works offline (no CDN).
 *
 *   node docs/build.mjs            writes ../python/src/densewire/_server/static/docs/ (committed)
 *   node docs/build.mjs OUTDIR     writes OUTDIR (ci.sh builds to a temporary folder and diffs it
 *                                  against the committed files, so a stale copy fails CI)
 *
 * The bundle's sourceMappingURL comment is dropped: the maps are not shipped.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = resolve(process.argv[2] ?? join(here, "..", "..", "python", "src", "densewire", "_server", "static", "docs"));
mkdirSync(outdir, { recursive: true });
const dist = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
const version = JSON.parse(readFileSync(join(dist, "package.json"), "utf8")).version;

for (const name of ["swagger-ui-bundle.js", "swagger-ui.css"]) {
  const text = readFileSync(join(dist, name), "utf8").replace(/\n?\/[/*]# sourceMappingURL=\S+?(?: \*\/)?\s*$/, "\n");
  writeFileSync(join(outdir, name), text);
}
copyFileSync(join(dist, "LICENSE"), join(outdir, "LICENSE"));
writeFileSync(join(outdir, "VERSION"), `swagger-ui-dist ${version}\n`);
for (const name of ["index.html", "init.js"]) copyFileSync(join(here, name), join(outdir, name));
console.log(`docs (swagger-ui-dist ${version}) built into ${outdir}`);
