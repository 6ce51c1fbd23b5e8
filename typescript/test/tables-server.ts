/**
 * A small in-process tables server on node:http for the client tests and the README examples: it
 * serves the golden bodies of one table (testdata/golden/tables.json) with the headers of SPEC.md
 * section 15.9: negotiation by Accept (q-values, server order at equal q) or ?format=, 406, ETag per
 * format and content coding, 304 on If-None-Match, gzip by Accept-Encoding, 404 envelopes, and
 * GET /v1/tables.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { type TableFormat, TABLE_FORMATS, TABLE_MEDIA_TYPES } from "../src/index.js";
import { type GoldenCase, fromHex } from "./helpers.js";
import { loadTablesGolden } from "./tables-helpers.js";

/** The golden cases of the `points` table, one per format (Protobuf: the byte-stream-split one). */
export function pointsCases(): GoldenCase[] {
  return loadTablesGolden().filter((c) => /^table\.[a-z-]+(\.bss|\.plain)?\.points$/.test(c.id));
}

interface Served {
  format: TableFormat;
  body: Uint8Array;
}

/** RFC 9110 negotiation among the table media types, the server's order breaking ties. */
export function negotiateTable(accept: string | undefined): TableFormat | undefined {
  if (accept === undefined || accept.trim() === "" ) return "json";
  const ranges = accept.split(",").map((part) => {
    const [type, ...params] = part.trim().split(";").map((x) => x.trim());
    const q = params.find((p) => p.startsWith("q="));
    return { type: type!.toLowerCase(), q: q === undefined ? 1 : Number(q.slice(2)) };
  });
  let best: TableFormat | undefined;
  let bestQ = 0;
  for (const f of TABLE_FORMATS) {
    let q = -1;
    let spec = -1;
    for (const r of ranges) {
      const s = r.type === "*/*" ? 0 : r.type === TABLE_MEDIA_TYPES[f].split("/")[0] + "/*" ? 1 : r.type === TABLE_MEDIA_TYPES[f] ? 2 : -1;
      if (s > spec) {
        spec = s;
        q = r.q;
      }
    }
    if (q > bestQ) {
      bestQ = q;
      best = f;
    }
  }
  return best;
}

export interface FakeTablesServer {
  url: string;
  requests: IncomingMessage["headers"][];
  close(): Promise<void>;
}

export async function startTablesServer(cases: GoldenCase[]): Promise<FakeTablesServer> {
  const bodies = new Map<TableFormat, Served>();
  let headers: Record<string, string> = {};
  for (const c of cases) {
    const format = c["format"] as TableFormat;
    if (format === "protobuf" && c["column_encoding"] !== "byte_stream_split") continue; // the server writes BSS
    const body = "encoded_hex" in c ? fromHex(c["encoded_hex"] as string) : new TextEncoder().encode(c["encoded_text"] as string);
    bodies.set(format, { format, body });
    headers = c["headers"] as Record<string, string>;
  }
  const name = headers["Densewire-Table"]!;
  const requests: IncomingMessage["headers"][] = [];
  const send = (res: ServerResponse, status: number, code: string, message: string, param: string | null) => {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: { message, type: "invalid_request_error", param, code } }));
  };
  const server = createServer((req, res) => {
    requests.push(req.headers);
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/v1/tables") {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ object: "table", name, rows: Number(headers["Densewire-Rows"]), columns: [
        { name: "uuid", type: "uuid" }, { name: "status", type: "int32" }, { name: "longitude", type: "float64" }, { name: "latitude", type: "float64" },
      ], version: "v1", refreshed_at: "2025-01-01T00:00:00Z", formats: [...TABLE_FORMATS] }] }));
      return;
    }
    const m = /^\/v1\/tables\/(.+)$/.exec(url.pathname);
    if (m === null || decodeURIComponent(m[1]!) !== name) return send(res, 404, "not_found", `no table ${m?.[1]}`, "name");
    const asked = url.searchParams.get("format");
    const format = asked !== null ? (TABLE_FORMATS.includes(asked as TableFormat) ? (asked as TableFormat) : undefined) : negotiateTable(req.headers.accept);
    if (format === undefined) return send(res, 406, "not_acceptable", "nothing acceptable", null);
    const served = bodies.get(format)!;
    const gzip = /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""));
    const etag = `"${format}-v1${gzip ? "-gzip" : ""}"`;
    const out: Record<string, string> = {
      ...headers,
      "Content-Type": format === "csv" ? "text/csv; charset=utf-8; header=present" : TABLE_MEDIA_TYPES[format],
      Vary: "Accept, Accept-Encoding",
      ETag: etag,
      "Cache-Control": "public, max-age=60",
    };
    const inm = req.headers["if-none-match"];
    if (inm !== undefined && (inm === "*" || inm.split(",").map((s) => s.trim()).includes(etag))) {
      res.writeHead(304, { ETag: etag, Vary: out["Vary"]! });
      return res.end();
    }
    let body: Uint8Array = served.body;
    if (gzip) {
      body = gzipSync(body);
      out["Content-Encoding"] = "gzip";
    }
    out["Content-Length"] = String(body.length);
    res.writeHead(200, out);
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

