/**
 * A digest of a decoded table (SPEC.md section 15.8 decoded form), the same whichever format it came
 * in: per column, two 32-bit hashes over the column's values in their canonical little-endian bytes
 * (uuid as its 16 bytes, bool as 0/1 bytes, strings as UTF-8 with their length), plus the name and
 * type. Two tables with the same digest have the same columns bit for bit (up to hash collisions: it
 * is a check for the demo and the tests, not a security function).
 */

/** The values of one decoded column, as the table decoders return them. */
export type ColumnValues =
  | Uint8Array
  | Int32Array
  | BigInt64Array
  | Float32Array
  | Float64Array
  | readonly boolean[]
  | readonly string[];

export interface DigestColumn {
  name: string;
  type: string;
  values: ColumnValues | ArrayLike<unknown>;
}

export interface DigestTable {
  rows: number;
  columns: readonly DigestColumn[];
}

export interface TableDigest {
  /** 16 hex digits over every column. */
  digest: string;
  /** 16 hex digits per column, by name. */
  columns: Record<string, string>;
  rows: number;
}

const encoder = new TextEncoder();

class Hasher {
  h1 = 0x811c9dc5 | 0;
  h2 = 0x9747b28c | 0;
  word(w: number): void {
    this.h1 = Math.imul(this.h1 ^ w, 0x01000193);
    let k = Math.imul(w, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    let h = this.h2 ^ k;
    h = (h << 13) | (h >>> 19);
    this.h2 = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  bytes(b: Uint8Array): void {
    const whole = b.byteLength & ~3;
    if ((b.byteOffset & 3) === 0) {
      const words = new Uint32Array(b.buffer, b.byteOffset, whole >>> 2);
      for (let i = 0; i < words.length; i++) this.word(words[i]!);
    } else {
      for (let i = 0; i < whole; i += 4) this.word(b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24));
    }
    let tail = 0;
    for (let i = whole; i < b.byteLength; i++) tail |= b[i]! << ((i - whole) * 8);
    this.word(tail);
    this.word(b.byteLength);
  }
  hex(): string {
    const mix = (h: number): number => {
      h ^= h >>> 16;
      h = Math.imul(h, 0x85ebca6b);
      h ^= h >>> 13;
      h = Math.imul(h, 0xc2b2ae35);
      return (h ^ (h >>> 16)) >>> 0;
    };
    return mix(this.h1).toString(16).padStart(8, "0") + mix(this.h2).toString(16).padStart(8, "0");
  }
}

/** The canonical little-endian bytes of a fixed-width column (a view where possible). */
function columnBytes(values: DigestColumn["values"]): Uint8Array | undefined {
  if (ArrayBuffer.isView(values)) {
    const v = values as unknown as ArrayBufferView;
    return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  }
  if (Array.isArray(values) && (values.length === 0 || typeof values[0] === "boolean")) {
    return Uint8Array.from(values as boolean[], (b) => (b ? 1 : 0));
  }
  return undefined;
}

export function digestTable(table: DigestTable): TableDigest {
  const all = new Hasher();
  const columns: Record<string, string> = {};
  for (const c of table.columns) {
    const h = new Hasher();
    h.bytes(encoder.encode(`${c.name}=${c.type};`));
    const bytes = columnBytes(c.values);
    if (bytes !== undefined) {
      h.bytes(bytes);
    } else {
      const list = c.values as ArrayLike<unknown>;
      for (let i = 0; i < list.length; i++) h.bytes(encoder.encode(String(list[i])));
    }
    h.word(c.values.length);
    columns[c.name] = h.hex();
    all.bytes(encoder.encode(columns[c.name]!));
  }
  all.word(table.rows);
  return { digest: all.hex(), columns, rows: table.rows };
}
