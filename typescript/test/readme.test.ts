/**
 * Every TypeScript example of README.md runs, in its own Node process importing "densewire" (the
 * package's own exports, built in dist/), and prints what its `// → ` comments say. Client examples
 * talk to the in-process fake servers (a densewire one for localhost:8000, an OpenAI-like one for
 * api.openai.com, and for TablesClient examples a tables one serving the golden `points` table);
 * embedSparse examples to a real `densewire serve --model hash:384` (DENSEWIRE_SERVER_URL, which
 * scripts/test.sh starts, else one started from the repository's .venv).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type FakeServer, startFakeServer } from "./server.js";
import { type FakeTablesServer, pointsCases, startTablesServer } from "./tables-server.js";
import { Server } from "./browser.js";

const run = promisify(execFile);
const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const readme = readFileSync(join(pkgDir, "README.md"), "utf8");

interface Example {
  line: number;
  code: string;
  expected: string[];
}

function examples(markdown: string): Example[] {
  const out: Example[] = [];
  const re = /^```(ts|typescript|js|javascript)\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(markdown); m !== null; m = re.exec(markdown)) {
    const code = m[2]!;
    const expected = code.split("\n").filter((l) => l.includes("// → ")).map((l) => l.slice(l.indexOf("// → ") + 5).trimEnd());
    out.push({ line: markdown.slice(0, m.index).split("\n").length, code, expected });
  }
  return out;
}

describe("README examples", { concurrency: 4 }, () => {
  let densewire: FakeServer;
  let openai: FakeServer;
  let tables: FakeTablesServer;
  let real: Server | undefined; // densewire serve, for the routes the fakes do not answer
  let realURL = process.env["DENSEWIRE_SERVER_URL"];
  const needsReal = (code: string) => code.includes("embedSparse");
  before(async () => {
    if (realURL === undefined && examples(readme).some((ex) => needsReal(ex.code))) {
      real = await Server.start(["--model", "hash:384", "--no-demo-tables"]);
      realURL = real.url;
    }
    densewire = await startFakeServer();
    openai = await startFakeServer({ mode: "openai", dimensions: 1536 });
    tables = await startTablesServer(pointsCases()); // the tables examples' server: the golden points table
  });
  after(async () => {
    await densewire.close();
    await openai.close();
    await tables.close();
    await real?.stop();
  });

  const found = examples(readme);
  it("has examples", () => assert.ok(found.length >= 8, `only ${found.length} examples found`));
  const dir = join(pkgDir, "build", "readme");
  mkdirSync(dir, { recursive: true });
  for (const ex of found) {
    it(`README.md line ${ex.line}`, async () => {
      assert.ok(ex.expected.length > 0, "an example must show its output in // → comments");
      const local = ex.code.includes("TablesClient") ? tables.url : needsReal(ex.code) ? `${realURL}/v1` : densewire.url;
      const code = ex.code.replaceAll("http://localhost:8000/v1", local).replaceAll("https://api.openai.com/v1", openai.url);
      const file = join(dir, `example-${ex.line}.mjs`);
      writeFileSync(file, code);
      const { stdout } = await run(process.execPath, [file], { cwd: pkgDir, timeout: 30_000 });
      assert.deepEqual(stdout.trimEnd().split("\n"), ex.expected);
    });
  }
});
