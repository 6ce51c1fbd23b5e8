/**
 * GET /docs of `densewire serve` in headless Chromium (Debian's, through playwright-core): Swagger UI
 * renders /openapi.json from the assets in the Python package, every request the page makes goes to
 * the server itself (no CDN: it works offline), and "Execute" calls the API from the page.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { Server, launchChromium, waitHealthy } from "./browser.js";
import { repoRoot } from "./helpers.js";

describe("GET /docs in headless Chromium", () => {
  let serverURL: string;
  let server: Server | undefined;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  const requests: string[] = [];
  const pageErrors: string[] = [];

  before(async () => {
    if (process.env.DENSEWIRE_SERVER_URL) {
      serverURL = process.env.DENSEWIRE_SERVER_URL.replace(/\/+$/, "");
      await waitHealthy(serverURL);
    } else {
      server = await Server.start(["--model", "hash:64", "--no-demo-tables"]);
      serverURL = server.url;
    }
    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    // every request of the page, and none allowed to leave the server: anything else is aborted
    await browser.context.route("**/*", async (route) => {
      const url = route.request().url();
      requests.push(url);
      if (url.startsWith(serverURL + "/") || url.startsWith("data:")) await route.continue();
      else await route.abort();
    });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    const response = await page.goto(`${serverURL}/docs`);
    assert.equal(response?.status(), 200);
    await page.waitForSelector(".opblock", { timeout: 60_000 });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("renders every path of /openapi.json from assets served by the server alone", async () => {
    const doc = (await (await fetch(`${serverURL}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const operations = Object.values(doc.paths).reduce((n, ops) => n + Object.keys(ops).filter((k) => k !== "parameters").length, 0);
    assert.ok(operations >= 5);
    assert.equal(await page.locator(".opblock").count(), operations);
    assert.deepEqual(pageErrors, []);
    const elsewhere = requests.filter((u) => !u.startsWith(serverURL + "/") && !u.startsWith("data:"));
    assert.deepEqual(elsewhere, [], "the page asked another host");
    for (const asset of ["/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css", "/docs/init.js", "/openapi.json"]) {
      assert.ok(requests.includes(serverURL + asset), `${asset} was not loaded: ${requests.join(" ")}`);
    }
  });

  it("calls the API from the page (GET /v1/models, Execute)", async () => {
    const op = page.locator(".opblock-get", { has: page.locator('[data-path="/v1/models"]') }).first();
    await op.locator(".opblock-summary").click();
    await op.locator("button.execute").click();
    const status = op.locator(".live-responses-table tr.response .response-col_status").first();
    await status.waitFor({ timeout: 30_000 });
    assert.match((await status.textContent()) ?? "", /200/);
    assert.match((await op.locator(".live-responses-table tr.response pre").first().textContent()) ?? "", /"object"/);
    const out = join(repoRoot(), "typescript", "test-output");
    mkdirSync(out, { recursive: true });
    await page.screenshot({ path: join(out, "docs.png"), fullPage: false });
  });
});
