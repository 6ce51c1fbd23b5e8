/**
 * The Protobuf wire-format reader shared by the tensor (SPEC.md section 9) and table (section 15.6)
 * decoders: varints, tags, length-delimited payloads and unknown fields, with the spec's error
 * offsets and its `truncated` / `malformed` distinction. Internal: not exported by the package.
 */
import { DensewireError } from "./errors.js";

export class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}

  truncated(): DensewireError {
    return new DensewireError("truncated", `the body ended after ${this.b.length} bytes, inside a field`, { offset: this.b.length });
  }

  malformed(offset: number, why: string, field?: string): DensewireError {
    return new DensewireError("malformed", `${why} at byte ${offset}`, { offset, field });
  }

  /** A varint ending before `end`; exact below 2^53, approximate above (only ever range-checked). */
  varint(end: number): number {
    const b = this.b;
    const start = this.pos;
    let p = start;
    // fast path: up to 4 bytes in 32-bit arithmetic
    let v = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      if (p >= end) throw end === b.length ? this.truncated() : this.malformed(start, "varint runs past the end of its message");
      const x = b[p++]!;
      v |= (x & 0x7f) << shift;
      if (x < 0x80) {
        this.pos = p;
        return v >>> 0;
      }
    }
    let value = v >>> 0;
    let scale = 2 ** 28;
    for (let i = 4; i < 10; i++) {
      if (p >= end) throw end === b.length ? this.truncated() : this.malformed(start, "varint runs past the end of its message");
      const x = b[p++]!;
      value += (x & 0x7f) * scale;
      scale *= 128;
      if (x < 0x80) {
        this.pos = p;
        return value;
      }
    }
    throw this.malformed(start, "varint longer than 10 bytes");
  }

  /** The [start, end) of a length-delimited payload whose length varint is at `pos`. */
  delimited(end: number, tagPos: number): [number, number] {
    const len = this.varint(end);
    const start = this.pos;
    if (start + len > end) {
      if (start + len > this.b.length && end === this.b.length) throw this.truncated();
      throw this.malformed(tagPos, `length ${len} runs past the end of the message`);
    }
    this.pos = start + len;
    return [start, start + len];
  }

  /** Skips an unknown field's value of wire type `wt` (groups included). */
  skip(wt: number, field: number, end: number, tagPos: number, depth = 0): void {
    switch (wt) {
      case 0:
        this.varint(end);
        return;
      case 1:
      case 5: {
        const k = wt === 1 ? 8 : 4;
        if (this.pos + k > end) throw end === this.b.length ? this.truncated() : this.malformed(tagPos, "fixed-width value runs past the end of the message");
        this.pos += k;
        return;
      }
      case 2:
        this.delimited(end, tagPos);
        return;
      case 3: {
        if (depth > 64) throw this.malformed(tagPos, "groups nested too deeply");
        for (;;) {
          if (this.pos >= end) throw end === this.b.length ? this.truncated() : this.malformed(tagPos, "unterminated group");
          const inner = this.pos;
          const tag = this.varint(end);
          if ((tag & 7) === 4) {
            if (tag >>> 3 !== field) throw this.malformed(inner, "end-group tag does not match its start");
            return;
          }
          this.skip(tag & 7, tag >>> 3, end, inner, depth + 1);
        }
      }
      default:
        throw this.malformed(tagPos, `wire type ${wt} is not valid here`);
    }
  }

  /** Reads a tag at `pos`: [field number, wire type]. */
  tag(end: number): [number, number] {
    const tagPos = this.pos;
    const tag = this.varint(end);
    const field = Math.floor(tag / 8);
    if (field === 0 || tag > 0xffffffff) throw this.malformed(tagPos, "invalid field number");
    return [field, tag & 7];
  }
}

/** Appends the entries of a `shape` field (packed or not) whose tag is at `tagPos` (SPEC.md section 9). */
export function readShapeEntries(r: Reader, end: number, tagPos: number, wt: number, shape: number[], prefix: string): void {
  if (wt === 2) {
    const [s, e] = r.delimited(end, tagPos);
    r.pos = s;
    while (r.pos < e) {
      // an entry running past the end of the packed field is malformed at the field's tag, even where
      // the body ends with the field
      let q = r.pos;
      while (q < e && r.b[q]! & 0x80 && q - r.pos < 10) q++;
      if (q >= e) throw r.malformed(tagPos, "a packed shape entry runs past the end of its field", prefix + "shape");
      shape.push(r.varint(e));
    }
  } else if (wt === 0) {
    shape.push(r.varint(end));
  } else {
    throw r.malformed(tagPos, `wire type ${wt} for the repeated varint field`, prefix + "shape");
  }
}
