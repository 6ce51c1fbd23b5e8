/**
 * The page's one entry into the library: densewire's table decoders from typescript/src (the same
 * code the npm package ships), bundled into demo.js. Nothing here decodes by itself.
 */
import { type Table, type TableFormat, decodeTable } from "../src/index.js";

/** Body bytes -> the columnar table (SPEC.md section 15.8), schema from the response headers. */
export async function decodeTableBody(body: Uint8Array, format: TableFormat, headers: Headers): Promise<Table> {
  return await decodeTable(body, format, { headers });
}
