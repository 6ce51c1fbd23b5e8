package dev.densewire.client;

import dev.densewire.Table;
import dev.densewire.TableFormat;

/**
 * The answer of {@link TablesClient#get}: the table, or {@code notModified} when the server answered
 * {@code 304} to {@code If-None-Match}.
 *
 * @param table           the decoded table; null when not modified
 * @param notModified     the table has not changed since the ETag sent in {@code If-None-Match}
 * @param etag            the strong ETag of this representation, for the next {@code If-None-Match}
 * @param lastModified    the {@code Last-Modified} header (null when absent)
 * @param format          the format the server chose (null when not modified)
 * @param contentEncoding the coding the body came in (zstd, br, gzip), "" for none
 * @param wireBytes       the body's size as received, before decompression
 * @param attempts        how many times the request was sent
 */
public record TableResult(Table table, boolean notModified, String etag, String lastModified, TableFormat format,
        String contentEncoding, int wireBytes, int attempts) {
}
