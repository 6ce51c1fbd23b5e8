package dev.densewire;

import dev.densewire.DensewireException.Category;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * A table (SPEC.md section 15): its name, {@code n} rows, and named typed columns in order, each holding exactly
 * {@code n} values, held column by column ({@link Column}). What every table decoder returns and every encoder
 * takes.
 *
 * <pre>{@code
 * Table t = Table.of("points", 2,
 *         Column.ofInt32("status", 1, 0),
 *         Column.ofFloat64("longitude", -73.98, 3.62),
 *         Column.ofVectors("embedding", 2, new float[] {0.1f, 0.2f, 0.3f, 0.4f}));
 * DoubleBuffer lon = t.column("longitude").float64s();
 * }</pre>
 */
public final class Table {
    private final String name;
    private final int rows;
    private final List<Column> columns;

    public Table(String name, int rows, List<Column> columns) {
        this.name = Objects.requireNonNull(name, "name");
        this.rows = rows;
        this.columns = List.copyOf(columns);
    }

    /** A table, checked by {@link #validate()}. */
    public static Table of(String name, int rows, Column... columns) {
        Table t = new Table(name, rows, List.of(columns));
        t.validate();
        return t;
    }

    public String name() {
        return name;
    }

    public int rows() {
        return rows;
    }

    public List<Column> columns() {
        return columns;
    }

    /** The column of that name, or null. */
    public Column column(String columnName) {
        for (Column c : columns) {
            if (c.name().equals(columnName)) {
                return c;
            }
        }
        return null;
    }

    /** The columns' names and types, in order. */
    public List<ColumnSpec> schema() {
        List<ColumnSpec> out = new ArrayList<>(columns.size());
        for (Column c : columns) {
            out.add(c.spec());
        }
        return out;
    }

    /**
     * Checks what every encoder needs: a row count &ge; 0, column names non-empty, unique and valid UTF-8, and each
     * column holding exactly {@code rows} values (bools 0 or 1).
     *
     * @throws DensewireException {@code invalid_field}, {@code shape_mismatch} or {@code length_mismatch} naming the
     *                            column
     */
    public Table validate() {
        if (rows < 0) {
            throw new DensewireException(Category.INVALID_FIELD, "negative row count " + rows, -1, "rows");
        }
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < columns.size(); i++) {
            Column c = columns.get(i);
            String field = "columns[" + i + "]";
            if (c.name().isEmpty() || !seen.add(c.name()) || !wellFormed(c.name())) {
                throw new DensewireException(Category.INVALID_FIELD,
                        "column names must be non-empty, unique and valid UTF-8: " + Tables.quote(c.name()), -1, field + ".name");
            }
            if (c.type() == ColumnType.STRING) {
                List<String> s = c.strings();
                if (s.size() != rows) {
                    throw new DensewireException(Category.SHAPE_MISMATCH,
                            "has " + s.size() + " strings for " + rows + " rows", -1, field);
                }
                for (String v : s) {
                    if (v == null || !wellFormed(v)) {
                        throw new DensewireException(Category.MALFORMED, "holds a null or a string with a lone surrogate",
                                -1, field);
                    }
                }
                continue;
            }
            ByteBuffer data = c.rawData();
            long need = (long) rows * c.spec().width();
            if (data.capacity() != need) {
                throw new DensewireException(Category.LENGTH_MISMATCH, "has " + data.capacity() + " bytes, " + rows
                        + " rows of " + c.spec().typeName() + " need " + need, -1, field + ".data");
            }
            if (c.type() == ColumnType.BOOL) {
                Tables.checkBools(data, field + ".data");
            }
        }
        return this;
    }

    private static boolean wellFormed(String s) {
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (Character.isHighSurrogate(ch)) {
                if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
                    return false;
                }
                i++;
            } else if (Character.isLowSurrogate(ch)) {
                return false;
            }
        }
        return true;
    }

    /** Same name, rows and columns, every value bit for bit. */
    @Override
    public boolean equals(Object o) {
        return o instanceof Table && name.equals(((Table) o).name) && rows == ((Table) o).rows
                && columns.equals(((Table) o).columns);
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, rows, columns);
    }

    @Override
    public String toString() {
        return "Table " + Tables.quote(name) + " of " + rows + " rows: " + schema();
    }
}
