/**
 * A bounds check of an Arrow IPC stream's message metadata (Flatbuffers, see Arrow's Message.fbs and
 * Schema.fbs), run before apache-arrow reads it. apache-arrow trusts the vector lengths it finds: a
 * few hundred bytes whose schema claims 2³¹ fields (or fields nested as a DAG, each child visited many
 * times) make it build arrays until the JavaScript heap is exhausted, which kills the process. Here
 * every table and vector a reader would visit must lie inside its message, and the tables visited are
 * at most the message's bytes, and every name and metadata key and value is UTF-8 (apache-arrow reads
 * others with U+FFFD in place, where the other languages' decoders refuse them); otherwise the stream
 * is `malformed`, with the offset of the message.
 */
import { DensewireError } from "./errors.js";

class Metadata {
  readonly #view: DataView;
  #budget: number;

  constructor(
    readonly bytes: Uint8Array,
    readonly at: number,
  ) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.#budget = bytes.length;
  }

  fail(what: string): never {
    throw new DensewireError("malformed", `the Arrow message at offset ${this.at} is invalid: ${what}`, { offset: this.at });
  }

  #need(pos: number, size: number, what: string): void {
    if (!(pos >= 0 && pos + size <= this.bytes.length)) this.fail(`${what} lies outside its ${this.bytes.length} bytes`);
  }

  u8(pos: number): number {
    this.#need(pos, 1, "a field");
    return this.#view.getUint8(pos);
  }

  u32(pos: number, what = "an offset"): number {
    this.#need(pos, 4, what);
    return this.#view.getUint32(pos, true);
  }

  /** The table at pos: its position and vtable, checked. */
  table(pos: number, what: string): Table {
    if (--this.#budget < 0) this.fail(`it nests more tables than it has bytes (at ${what})`);
    this.#need(pos, 4, what);
    const vtable = pos - this.#view.getInt32(pos, true);
    this.#need(vtable, 4, `the vtable of ${what}`);
    const vsize = this.#view.getUint16(vtable, true);
    const osize = this.#view.getUint16(vtable + 2, true);
    if (vsize < 4 || vsize % 2 !== 0) this.fail(`the vtable of ${what} has size ${vsize}`);
    this.#need(vtable, vsize, `the vtable of ${what}`);
    this.#need(pos, osize, what);
    return new Table(this, pos, vtable, vsize, what);
  }
}

class Table {
  constructor(
    readonly m: Metadata,
    readonly pos: number,
    readonly vtable: number,
    readonly vsize: number,
    readonly what: string,
  ) {}

  /** The position of field `slot`, or 0 when absent. */
  field(slot: number): number {
    const at = 4 + 2 * slot;
    if (at + 2 > this.vsize) return 0;
    const off = this.m.bytes[this.vtable + at]! | (this.m.bytes[this.vtable + at + 1]! << 8);
    return off === 0 ? 0 : this.pos + off;
  }

  u8(slot: number): number {
    const p = this.field(slot);
    return p === 0 ? 0 : this.m.u8(p);
  }

  /** The target of an offset field, or 0. */
  ref(slot: number): number {
    const p = this.field(slot);
    return p === 0 ? 0 : p + this.m.u32(p, `field ${slot} of ${this.what}`);
  }

  child(slot: number, what: string): Table | undefined {
    const p = this.ref(slot);
    return p === 0 ? undefined : this.m.table(p, what);
  }

  /** A vector field: its first element's position and length, its elements inside the message. */
  vector(slot: number, elementSize: number, what: string): { start: number; length: number } {
    const p = this.ref(slot);
    if (p === 0) return { start: 0, length: 0 };
    const length = this.m.u32(p, what);
    if (p + 4 + length * elementSize > this.m.bytes.length) this.m.fail(`${what} claims ${length} elements, more than its bytes hold`);
    return { start: p + 4, length };
  }

  /** A string field: its bytes must be UTF-8 (apache-arrow would turn them into U+FFFD silently). */
  utf8(slot: number, what: string): void {
    const { start, length } = this.vector(slot, 1, what);
    if (length > 0 && !isUtf8(this.m.bytes.subarray(start, start + length))) this.m.fail(`${what} is not valid UTF-8`);
  }

  /** The tables of a vector of tables. */
  *tables(slot: number, what: string): Generator<Table> {
    const { start, length } = this.vector(slot, 4, what);
    for (let i = 0; i < length; i++) {
      const p = start + 4 * i;
      yield this.m.table(p + this.m.u32(p), `${what}[${i}]`);
    }
  }
}

const strict = new TextDecoder("utf-8", { fatal: true });
function isUtf8(bytes: Uint8Array): boolean {
  try {
    strict.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

function keyValues(t: Table, slot: number, what: string): void {
  for (const kv of t.tables(slot, what)) {
    kv.utf8(0, `${what} key`);
    kv.utf8(1, `${what} value`);
  }
}

function field(t: Table, depth: number): void {
  if (depth > 64) t.m.fail("fields nest deeper than 64");
  t.utf8(0, "a field name");
  t.child(3, "a field type");
  const dictionary = t.child(4, "a dictionary encoding");
  dictionary?.child(1, "a dictionary index type");
  for (const c of t.tables(5, "field children")) field(c, depth + 1);
  keyValues(t, 6, "field metadata");
}

function recordBatch(t: Table): void {
  // a negative length: apache-arrow counts the rows of the columns instead (Java finding 5)
  const length = t.field(0);
  if (length !== 0 && t.m.u32(length + 4, "the batch length") >= 2 ** 31) t.m.fail("the record batch has a negative length");
  t.vector(1, 16, "the field nodes");
  t.vector(2, 16, "the buffers");
  t.child(3, "the compression");
  t.vector(4, 8, "the variadic buffer counts");
}

/**
 * Checks the metadata of every message of an Arrow IPC stream (encapsulated, with or without the
 * 0xFFFFFFFF continuation marker) up to its end-of-stream marker. A metadata cut short is left to the
 * reader (its own error); one whose tables or vectors reach outside it is `malformed`; a body longer
 * than the bytes left is `truncated` (offset: the stream's length).
 */
export function checkArrowStream(bytes: Uint8Array): { unnamed: number[] } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const unnamed: number[] = []; // the schema's top-level fields without a name (apache-arrow says "null")
  const truncated = (what: string) =>
    new DensewireError("truncated", `the Arrow stream ends inside ${what}: ${bytes.length} bytes`, { offset: bytes.length });
  let pos = 0;
  while (pos + 4 <= bytes.length) {
    const at = pos;
    let size = view.getInt32(pos, true);
    pos += 4;
    if (size === -1) {
      if (pos + 4 > bytes.length) throw truncated(`the prefix of the message at offset ${at}`);
      size = view.getInt32(pos, true);
      pos += 4;
    }
    if (size === 0) return { unnamed }; // end of stream
    if (size < 0) throw new DensewireError("malformed", `the Arrow message at offset ${at} has a negative metadata length ${size}`, { offset: at });
    // SPEC.md section 10, framing first: metadata announced past the end is truncated, never read
    if (pos + size > bytes.length) throw truncated(`the ${size}-byte metadata of the message at offset ${at}`);
    const m = new Metadata(bytes.subarray(pos, pos + size), at);
    const message = m.table(m.u32(0, "the root offset"), "the message");
    const header = message.child(2, "the message header");
    switch (message.u8(1)) {
      case 1: // Schema
        if (header === undefined) break;
        {
          let i = 0;
          for (const f of header.tables(1, "the schema's fields")) {
            if (f.field(0) === 0) unnamed.push(i);
            field(f, 0);
            i++;
          }
        }
        keyValues(header, 2, "the schema metadata");
        header.vector(3, 8, "the schema features");
        break;
      case 2: // DictionaryBatch
        if (header !== undefined) {
          const data = header.child(1, "the dictionary data");
          if (data !== undefined) recordBatch(data);
        }
        break;
      case 3: // RecordBatch
        if (header !== undefined) recordBatch(header);
        break;
    }
    keyValues(message, 4, "the message metadata");
    const p = message.field(3);
    const body = p === 0 ? 0 : m.u32(p, "the body length") + 2 ** 32 * m.u32(p + 4, "the body length");
    pos += size;
    if (body > bytes.length - pos) {
      // apache-arrow runs out of heap on a body length of petabytes; what is missing is missing
      throw new DensewireError("truncated", `the Arrow message at offset ${at} announces a ${body}-byte body, ${bytes.length - pos} bytes remain`, { offset: bytes.length });
    }
    pos += body;
  }
  return { unnamed };
}
