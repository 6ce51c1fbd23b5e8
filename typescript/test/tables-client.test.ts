/**
 * The tables client against a small in-process node:http server serving the golden `points` bodies
 * with the headers of SPEC.md section 15.9 (negotiation by Accept or ?format=, ETag/304, gzip), and,
 * when DENSEWIRE_SERVER_URL is set (scripts/test.sh sets it), against the real `densewire serve` and
 * its demo tables `points` and `points_f32`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  type Table,
  DensewireError,
  DensewireHTTPError,
  TABLE_FORMATS,
  TABLE_MEDIA_TYPES,
  TablesClient,
  tableAcceptHeader,
} from "../src/index.js";
import { assertTableEqual, tableOfCase } from "./tables-helpers.js";
import { type FakeTablesServer, pointsCases, startTablesServer } from "./tables-server.js";

describe("tables client against an in-process server", () => {
  const cases = pointsCases();
  const expected: Table = tableOfCase(cases[0]!);
  let server: FakeTablesServer;
  before(async () => {
    server = await startTablesServer(cases);
  });
  after(() => server.close());

  it("asks for Protobuf first and decodes it", async () => {
    assert.equal(tableAcceptHeader(), "application/protobuf, application/vnd.msgpack;q=0.9, application/vnd.densewire.columns+json;q=0.8, application/json;q=0.7");
    const client = new TablesClient({ baseURL: server.url });
    const r = await client.getTable("points");
    assert.equal(r.format, "protobuf");
    assert.equal(r.status, 200);
    assert.equal(r.notModified, false);
    assert.equal(r.etag, '"protobuf-v1-gzip"');
    assert.equal(r.contentEncoding, "gzip");
    assert.ok(r.contentLength !== undefined && r.contentLength > 0);
    assert.equal(r.bytes, (cases.find((c) => c.id === "table.protobuf.bss.points")!["encoded_hex"] as string).length / 2);
    assertTableEqual(r.table!, expected);
    assert.equal(server.requests.at(-1)!.accept, tableAcceptHeader());
  });

  it("decodes every format the same, JSON objects and CSV with the schema of Densewire-Columns", async () => {
    const client = new TablesClient({ baseURL: server.url });
    for (const format of TABLE_FORMATS) {
      const byParam = await client.getTable("points", { format });
      assert.equal(byParam.format, format);
      assertTableEqual(byParam.table!, expected, format);
      const byAccept = await client.getTable("points", { format: [format] });
      assert.equal(byAccept.format, format);
      assert.equal(server.requests.at(-1)!.accept, TABLE_MEDIA_TYPES[format]);
    }
    const csvFirst = new TablesClient({ baseURL: server.url, formats: ["csv", "json"] });
    assert.equal((await csvFirst.getTable("points")).format, "csv");
  });

  it("revalidates with If-None-Match: a 304 gives the cached table, or notModified without one", async () => {
    const client = new TablesClient({ baseURL: server.url });
    const first = await client.getTable("points");
    const again = await client.getTable("points", { cached: first });
    assert.equal(server.requests.at(-1)!["if-none-match"], first.etag);
    assert.equal(again.status, 304);
    assert.equal(again.notModified, true);
    assert.equal(again.table, first.table);
    assert.equal(again.format, "protobuf");
    assert.equal(again.bytes, 0);
    const bare = await client.getTable("points", { ifNoneMatch: first.etag! });
    assert.equal(bare.notModified, true);
    assert.equal(bare.table, undefined);
    const stale = await client.getTable("points", { ifNoneMatch: '"old"' });
    assert.equal(stale.notModified, false);
    assertTableEqual(stale.table!, expected);
  });

  it("lists tables", async () => {
    const list = await new TablesClient({ baseURL: server.url }).listTables();
    assert.equal(list.length, 1);
    assert.equal(list[0]!.name, "points");
    assert.deepEqual(list[0]!.columns.map((c) => c.type), ["uuid", "int32", "float64", "float64"]);
    assert.equal(list[0]!.refreshedAt, "2025-01-01T00:00:00Z");
    assert.deepEqual(list[0]!.formats, TABLE_FORMATS);
  });

  it("raises the server's errors: 404 not_found on name; an unknown Content-Type is unsupported_media_type", async () => {
    const client = new TablesClient({ baseURL: server.url });
    await assert.rejects(client.getTable("nope"), (e: unknown) => e instanceof DensewireHTTPError && e.status === 404 && e.code === "not_found" && e.param === "name");
    const html = new TablesClient({ baseURL: server.url, fetch: async () => new Response("<html>", { headers: { "Content-Type": "text/html" } }) });
    await assert.rejects(html.getTable("points"), (e: unknown) => e instanceof DensewireError && e.category === "unsupported_media_type");
    const broken = new TablesClient({
      baseURL: server.url,
      fetch: async () => new Response(new Uint8Array([0x1a, 0x05]), { headers: { "Content-Type": "application/protobuf" } }),
    });
    await assert.rejects(broken.getTable("points"), (e: unknown) => e instanceof DensewireError && e.category === "truncated" && e.offset === 2);
  });

  it("passes the signal, the API key and extra headers", async () => {
    const client = new TablesClient({ baseURL: server.url + "/", apiKey: "k", headers: { "X-Trace": "1" } });
    await client.getTable("points");
    assert.equal(server.requests.at(-1)!.authorization, "Bearer k");
    assert.equal(server.requests.at(-1)!["x-trace"], "1");
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    await assert.rejects(client.getTable("points", { signal: controller.signal }), /stop/);
  });
});

const live = process.env["DENSEWIRE_SERVER_URL"];
describe("tables client against densewire serve (DENSEWIRE_SERVER_URL)", () => {
  if (live === undefined || live === "") {
    it.skip("DENSEWIRE_SERVER_URL is not set: scripts/test.sh sets it to a running densewire serve");
    return;
  }
  const client = new TablesClient({ baseURL: live.replace(/\/+$/, "") + "/v1" });

  it("lists the demo tables points and points_f32", async () => {
    const names = (await client.listTables()).map((t) => t.name);
    assert.ok(names.includes("points") && names.includes("points_f32"), `tables: ${names.join(", ")}`);
  });

  for (const [name, coordinates] of [["points", "float64"], ["points_f32", "float32"]] as const) {
    it(`gets ${name} as Protobuf by default, every format decoding to the same table, with ETag revalidation`, async () => {
      const r = await client.getTable(name);
      assert.equal(r.format, "protobuf");
      const t = r.table!;
      assert.equal(t.name, name);
      assert.equal(t.rows, 67627);
      assert.deepEqual(t.columns.map((c) => [c.name, c.type]), [["uuid", "uuid"], ["status", "int32"], ["longitude", coordinates], ["latitude", coordinates]]);
      const status = t.columns[1]!.values as Int32Array;
      assert.ok(status.every((s) => s === 0 || s === 1));
      const lon = t.columns[2]!.values as Float64Array | Float32Array;
      assert.ok(lon.every((x) => x >= -180 && x <= 180));
      for (const format of TABLE_FORMATS) {
        if (format === "protobuf") continue;
        const other = await client.getTable(name, { format });
        assert.equal(other.format, format);
        assertTableEqual(other.table!, t, `${name} as ${format}`);
      }
      assert.ok(r.etag !== undefined, "an ETag");
      const again = await client.getTable(name, { cached: r });
      assert.equal(again.status, 304, `If-None-Match ${r.etag} answered ${again.status} with ETag ${again.etag}`);
      assert.equal(again.table, t);
    });
  }
});
