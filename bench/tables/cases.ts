/**
 * The decoders compared by bench/tables, shared by the Node run and the Chromium page (esbuild
 * bundles this file twice, so both run the same code), and the row-oriented baselines built from
 * the decoded densewire table.
 *
 * "Decode" is body bytes -> data a map can use. What each produces is in `produces`: the row
 * baselines give one JS object or array a row (uuid as a 36-char string, numbers as JS numbers);
 * densewire's decoders give columns (uuid as n x 16 bytes, status Int32Array, coordinates
 * Float64Array or Float32Array).
 */
import protobuf from "protobufjs";
import { decode as msgpackDecode, encode as msgpackEncode } from "@msgpack/msgpack";
import { type Table, type TableFormat, decodeTable, decodeTableSync, uuidToString } from "../../typescript/src/index.js";

/** The published row schema (uuid as its 36-char text, coordinates as double). */
export const ROW_PROTO = `syntax = "proto3";
message Point { string uuid = 1; int32 status = 2; double longitude = 3; double latitude = 4; }
message Points { repeated Point points = 1; }`;
/** The same with float32 coordinates (`float`), for the float32 comparison. */
export const ROW_PROTO_F32 = ROW_PROTO.replace(/double/g, "float");

/**
 * protobufjs by reflection: `protobuf.parse` of the schema text, then `Type.decode`. protobufjs
 * generates each type's decoder as JavaScript at first use (its codegen, the code `pbjs -t static`
 * would write), so this runs the same decoding loop as static code.
 */
function rowTypes(schema: string): { Points: protobuf.Type } {
  const root = protobuf.parse(schema, { keepCase: true }).root;
  return { Points: root.lookupType("Points") };
}
const PB = rowTypes(ROW_PROTO);
const PB32 = rowTypes(ROW_PROTO_F32);

export interface PointRow {
  uuid: string;
  status: number;
  longitude: number;
  latitude: number;
}

/** JS rows of a decoded demo table (uuid text, numbers), the input of every baseline encoder. */
export function rowsOf(table: Table): PointRow[] {
  const col = (n: string) => table.columns.find((c) => c.name === n)!.values;
  const uuid = col("uuid") as Uint8Array;
  const status = col("status") as Int32Array;
  const lon = col("longitude") as Float64Array | Float32Array;
  const lat = col("latitude") as Float64Array | Float32Array;
  const rows: PointRow[] = new Array(table.rows);
  for (let i = 0; i < table.rows; i++) rows[i] = { uuid: uuidToString(uuid, i), status: status[i]!, longitude: lon[i]!, latitude: lat[i]! };
  return rows;
}

const utf8 = new TextEncoder();

/** The row-oriented baseline bodies of the published case, built from the decoded float64 table. */
export function baselineBodies(points: Table, pointsF32: Table): Record<string, Uint8Array> {
  const rows = rowsOf(points);
  const rows32 = rowsOf(pointsF32);
  return {
    "points.json-objects": utf8.encode(JSON.stringify(rows)),
    "points.json-compact": utf8.encode(JSON.stringify(rows.map((r) => [r.uuid, r.status, r.longitude, r.latitude]))),
    "points.msgpack-rows": msgpackEncode(rows.map((r) => [r.uuid, r.status, r.longitude, r.latitude])),
    "points.protobuf-rows": PB.Points.encode(PB.Points.fromObject({ points: rows })).finish(),
    "points_f32.protobuf-rows": PB32.Points.encode(PB32.Points.fromObject({ points: rows32 })).finish(),
  };
}

/** What the checker reads from a decoded result: rows, longitude sum in row order, first and last uuid. */
export interface Check {
  rows: number;
  lonSum: number;
  latSum: number;
  firstUuid: string;
  lastUuid: string;
  status1: number;
}

function checkRows(rows: readonly PointRow[] | readonly unknown[][]): Check {
  const n = rows.length;
  let lonSum = 0;
  let latSum = 0;
  let status1 = 0;
  const get = (r: unknown): [string, number, number, number] =>
    Array.isArray(r) ? (r as [string, number, number, number]) : [(r as PointRow).uuid, (r as PointRow).status, (r as PointRow).longitude, (r as PointRow).latitude];
  for (let i = 0; i < n; i++) {
    const [, s, lo, la] = get(rows[i]);
    lonSum += lo;
    latSum += la;
    status1 += s;
  }
  return { rows: n, lonSum, latSum, status1, firstUuid: get(rows[0])[0], lastUuid: get(rows[n - 1])[0] };
}

function checkTable(t: Table): Check {
  const col = (n: string) => t.columns.find((c) => c.name === n)!.values;
  const uuid = col("uuid") as Uint8Array;
  const status = col("status") as Int32Array;
  const lon = col("longitude") as Float64Array;
  const lat = col("latitude") as Float64Array;
  let lonSum = 0;
  let latSum = 0;
  let status1 = 0;
  for (let i = 0; i < t.rows; i++) {
    lonSum += lon[i]!;
    latSum += lat[i]!;
    status1 += status[i]!;
  }
  return { rows: t.rows, lonSum, latSum, status1, firstUuid: uuidToString(uuid, 0), lastUuid: uuidToString(uuid, t.rows - 1) };
}

export interface Case {
  id: string;
  /** The body it reads (a key of the bodies map: TABLE.FORMAT). */
  body: string;
  /** Which table's data: points (float64) or points_f32. */
  table: "points" | "points_f32";
  label: string;
  produces: string;
  decode(bytes: Uint8Array, ctx: CaseContext): unknown;
  check(out: unknown): Check;
}

export interface CaseContext {
  /** Densewire-Columns of each table (for JSON objects and CSV, which carry no types). */
  columns: Record<string, string>;
}

const text = new TextDecoder();
const OBJECTS = "an object a row: uuid string, numbers";
const ARRAYS = "an array a row: uuid string, numbers";
const COLUMNS = "columns: uuid n×16 bytes, Int32Array, Float64Array ×2";
const COLUMNS32 = "columns: uuid n×16 bytes, Int32Array, Float32Array ×2";

function densewire(table: "points" | "points_f32", format: TableFormat, label: string): Case {
  return {
    id: `densewire ${format}${table === "points_f32" ? " f32" : ""}`,
    body: `${table}.${format}`,
    table,
    label,
    produces: table === "points" ? COLUMNS : COLUMNS32,
    // the synchronous decoder where there is one (Arrow's is async: apache-arrow loads lazily)
    decode: (bytes, ctx) =>
      format === "arrow" ? decodeTable(bytes, format, { columns: ctx.columns[table]!, name: table }) : decodeTableSync(bytes, format, { columns: ctx.columns[table]!, name: table }),
    check: (out) => checkTable(out as Table),
  };
}

/** Every case, in report order. Arrow's decode returns a promise (apache-arrow is loaded lazily). */
export const CASES: Case[] = [
  {
    id: "JSON.parse objects (string)",
    body: "points.json-objects",
    table: "points",
    label: "JSON objects, JSON.parse of the text (as published: UTF-8 already decoded)",
    produces: OBJECTS,
    decode: (_b, ctx) => JSON.parse((ctx as CaseContext & { jsonText: string }).jsonText),
    check: (out) => checkRows(out as PointRow[]),
  },
  {
    id: "JSON.parse objects",
    body: "points.json-objects",
    table: "points",
    label: "JSON objects, TextDecoder + JSON.parse",
    produces: OBJECTS,
    decode: (b) => JSON.parse(text.decode(b)),
    check: (out) => checkRows(out as PointRow[]),
  },
  {
    id: "JSON.parse compact",
    body: "points.json-compact",
    table: "points",
    label: "compact JSON (arrays), TextDecoder + JSON.parse",
    produces: ARRAYS,
    decode: (b) => JSON.parse(text.decode(b)),
    check: (out) => checkRows(out as unknown[][]),
  },
  {
    id: "@msgpack/msgpack rows",
    body: "points.msgpack-rows",
    table: "points",
    label: "MessagePack rows, @msgpack/msgpack decode",
    produces: ARRAYS,
    decode: (b) => msgpackDecode(b),
    check: (out) => checkRows(out as unknown[][]),
  },
  {
    id: "protobufjs rows",
    body: "points.protobuf-rows",
    table: "points",
    label: "row-oriented Protobuf (published schema), protobufjs reflection",
    produces: "a Point message a row: uuid string, numbers",
    decode: (b) => (PB.Points.decode(b) as unknown as { points: PointRow[] }).points,
    check: (out) => checkRows(out as PointRow[]),
  },
  {
    id: "protobufjs rows f32",
    body: "points_f32.protobuf-rows",
    table: "points_f32",
    label: "row-oriented Protobuf with float coordinates, protobufjs reflection",
    produces: "a Point message a row: uuid string, numbers",
    decode: (b) => (PB32.Points.decode(b) as unknown as { points: PointRow[] }).points,
    check: (out) => checkRows(out as PointRow[]),
  },
  densewire("points", "json", "densewire JSON objects -> columns"),
  densewire("points", "json-rows", "densewire JSON rows -> columns"),
  densewire("points", "json-columns", "densewire JSON columns -> columns"),
  densewire("points", "csv", "densewire CSV -> columns"),
  densewire("points", "msgpack", "densewire columnar MessagePack"),
  densewire("points", "protobuf", "densewire columnar Protobuf (byte-stream-split)"),
  {
    ...densewire("points", "protobuf", "densewire columnar Protobuf, plus a uuid string per row"),
    id: "densewire protobuf + uuid strings",
    produces: COLUMNS + ", plus 67,627 uuid strings (like the row decoders)",
    decode: (bytes) => {
      const t = decodeTableSync(bytes, "protobuf");
      const u = t.columns.find((c) => c.name === "uuid")!.values as Uint8Array;
      const strings = new Array<string>(t.rows);
      for (let i = 0; i < t.rows; i++) strings[i] = uuidToString(u, i);
      return { t, strings };
    },
    check: (out) => {
      const { t, strings } = out as { t: Table; strings: string[] };
      const c = checkTable(t);
      if (strings[0] !== c.firstUuid) throw new Error("uuid strings differ");
      return c;
    },
  },
  densewire("points", "arrow", "densewire Arrow IPC stream (apache-arrow)"),
  densewire("points_f32", "msgpack", "densewire columnar MessagePack, float32 coordinates"),
  densewire("points_f32", "protobuf", "densewire columnar Protobuf, float32 coordinates"),
  densewire("points_f32", "arrow", "densewire Arrow, float32 coordinates"),
];

export interface Stats {
  id: string;
  samples: number;
  medianMs: number;
  minMs: number;
  check: Check;
}

/**
 * Times each case: `warmup` untimed decodes, then `rounds` rounds of `iterations` timed decodes each,
 * the cases interleaved round by round (so a noisy moment hits them all). Median and min of all
 * timed decodes. Each result is checked (outside the timing) against the reference check.
 */
export async function runCases(
  cases: readonly Case[],
  bodies: Record<string, Uint8Array>,
  ctx: CaseContext,
  opts: { warmup: number; iterations: number; rounds: number; now: () => number; gc?: () => void; log?: (s: string) => void },
): Promise<Stats[]> {
  const times = new Map<string, number[]>();
  const checks = new Map<string, Check>();
  const fullCtx = { ...ctx, jsonText: text.decode(bodies["points.json-objects"]!) };
  for (const c of cases) {
    const body = bodies[c.body];
    if (body === undefined) throw new Error(`no body ${c.body}`);
    for (let i = 0; i < opts.warmup; i++) await c.decode(body, fullCtx);
    checks.set(c.id, c.check(await c.decode(body, fullCtx)));
    times.set(c.id, []);
  }
  for (let r = 0; r < opts.rounds; r++) {
    for (const c of cases) {
      const body = bodies[c.body]!;
      const t = times.get(c.id)!;
      opts.gc?.();
      for (let i = 0; i < opts.iterations; i++) {
        const t0 = opts.now();
        const out = c.decode(body, fullCtx);
        if (out instanceof Promise) await out;
        t.push(opts.now() - t0);
      }
    }
    opts.log?.(`round ${r + 1}/${opts.rounds} done`);
  }
  return cases.map((c) => {
    const t = times.get(c.id)!.slice().sort((a, b) => a - b);
    return { id: c.id, samples: t.length, medianMs: t[t.length >> 1]!, minMs: t[0]!, check: checks.get(c.id)! };
  });
}
