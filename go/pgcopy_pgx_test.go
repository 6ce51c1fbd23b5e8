package densewire_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	densewire "github.com/densewire/densewire/go"
)

// Binary COPY against a real PostgreSQL with pgvector through pgx, the driver Go users have
// (SPEC.md section 16): DENSEWIRE_PG_URL names it (scripts/test.sh starts one with
// scripts/postgres.sh). Unset, the test fails when CI=true and is skipped, saying why, otherwise.

func pgConn(t *testing.T) *pgx.Conn {
	t.Helper()
	url := os.Getenv("DENSEWIRE_PG_URL")
	if url == "" {
		const how = "DENSEWIRE_PG_URL is unset: start a PostgreSQL with pgvector with " +
			"url=$(bash scripts/postgres.sh start /tmp/pg-go) and run DENSEWIRE_PG_URL=$url go test -run Pgx ."
		if os.Getenv("CI") == "true" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to DENSEWIRE_PG_URL: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// 1,000 x 384 vectors into vector(384), halfvec(384), bit(384) and sparsevec(384) columns with
// pgx's raw CopyFrom, read back with COPY ... TO STDOUT (FORMAT BINARY) through DecodeCopy: equal
// bit for bit to what the column stores (halfvec after float16 rounding, bit after the sign test).
func TestPgxCopyVectors(t *testing.T) {
	conn := pgConn(t)
	ctx := context.Background()
	const n, d = 1000, 384
	src := randomVectors(t, n, d, 42)
	v, _ := src.Float32()
	for i := range v { // a sparse column needs zeros; the other columns do not mind them
		if i%7 != 0 {
			continue
		}
		v[i] = 0
	}
	src, _ = densewire.FromFloat32(v, n, d, densewire.Float32)
	ids := &densewire.CopyIDs{Ints: make([]int64, n)}
	for i := range ids.Ints {
		ids.Ints[i] = int64(i)*3 - 1000 // ordered, some negative
	}
	for _, typ := range []densewire.PgType{densewire.PgVector, densewire.PgHalfvec, densewire.PgBit, densewire.PgSparsevec} {
		t.Run(string(typ), func(t *testing.T) {
			table := "dw_go_copy_" + string(typ)
			if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s (id int8 PRIMARY KEY, embedding %s(%d))", table, typ, d)); err != nil {
				t.Fatal(err)
			}
			defer conn.Exec(ctx, "DROP TABLE "+table)
			cols := densewire.CopyColumns{Type: typ, IDType: densewire.PgInt8}
			reader := densewire.NewCopyReader(src, cols, ids, 256)
			tag, err := conn.PgConn().CopyFrom(ctx, reader, densewire.CopyFromSQL(table, cols))
			if err != nil {
				t.Fatal(err)
			}
			if tag.RowsAffected() != n || reader.Rows() != n {
				t.Fatalf("COPY FROM: %d rows, the reader %d, want %d", tag.RowsAffected(), reader.Rows(), n)
			}
			var buf bytes.Buffer
			if _, err := conn.PgConn().CopyTo(ctx, &buf, "COPY (SELECT id, embedding FROM "+table+" ORDER BY id) TO STDOUT (FORMAT BINARY)"); err != nil {
				t.Fatal(err)
			}
			got, err := densewire.DecodeCopy(buf.Bytes(), cols)
			if err != nil {
				t.Fatal(err)
			}
			want, err := densewire.FromFloat32(v, n, d, typ.DType())
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, "read back", got.Tensor, want)
			sameIDs(t, got.IDs, ids, n)

			// PostgreSQL itself read the values we sent: its text output of one row agrees.
			var text string
			if err := conn.QueryRow(ctx, "SELECT embedding::text FROM "+table+" WHERE id = $1", ids.Ints[5]).Scan(&text); err != nil {
				t.Fatal(err)
			}
			checkPgText(t, typ, text, want, 5)
		})
	}
}

// checkPgText compares PostgreSQL's text form of one stored vector with row r of want.
func checkPgText(t *testing.T, typ densewire.PgType, text string, want *densewire.Tensor, r int) {
	t.Helper()
	d := want.D
	if typ == densewire.PgBit {
		var b strings.Builder
		for j := range d {
			if want.Bit(r, j) {
				b.WriteByte('1')
			} else {
				b.WriteByte('0')
			}
		}
		if text != b.String() {
			t.Fatalf("bit row %d: PostgreSQL has %s, want %s", r, text, b.String())
		}
		return
	}
	all, _ := want.Float32()
	row := all[r*d : (r+1)*d]
	var parts []string
	if typ == densewire.PgSparsevec { // {1:0.5,3:-2}/384, 1-based indices
		body, dims, _ := strings.Cut(strings.TrimPrefix(text, "{"), "}/")
		if dims != fmt.Sprint(d) {
			t.Fatalf("sparsevec row %d: %s", r, text)
		}
		full := make([]string, d)
		for i := range full {
			full[i] = "0"
		}
		for kv := range strings.SplitSeq(body, ",") {
			k, val, _ := strings.Cut(kv, ":")
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 1 || idx > d {
				t.Fatalf("sparsevec row %d: %s", r, text)
			}
			full[idx-1] = val
		}
		parts = full
	} else {
		parts = strings.Split(strings.Trim(text, "[]"), ",")
	}
	if len(parts) != d {
		t.Fatalf("%s row %d: %d values in PostgreSQL's text, want %d", typ, r, len(parts), d)
	}
	for j, p := range parts {
		// pgvector prints the shortest text that reads back as the same float32
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			t.Fatalf("%s row %d: %q: %v", typ, r, p, err)
		}
		if float32(f) != row[j] {
			t.Fatalf("%s row %d dim %d: PostgreSQL has %s, we sent %v", typ, r, j, p, row[j])
		}
	}
}

// An infinity in a later chunk makes the reader fail mid-stream: pgx aborts the COPY and PostgreSQL
// keeps none of the rows of the chunks already sent.
func TestPgxCopyAbortsOnBadRow(t *testing.T) {
	conn := pgConn(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE dw_go_abort (embedding vector(8))"); err != nil {
		t.Fatal(err)
	}
	src := randomVectors(t, 600, 8, 43)
	v, _ := src.Float32()
	v[500*8+3] = float32(math.Inf(1))
	src, _ = densewire.FromFloat32(v, 600, 8, densewire.Float32)
	reader := densewire.NewCopyReader(src, densewire.CopyColumns{}, nil, 100)
	_, err := conn.PgConn().CopyFrom(ctx, reader, densewire.CopyFromSQL("dw_go_abort", densewire.CopyColumns{}))
	if err == nil {
		t.Fatal("the COPY of a stream with +Inf succeeded")
	}
	// pgx sends the reader's error as the CopyFail message, which PostgreSQL's error repeats
	if reader.Rows() != 500 || !strings.Contains(err.Error(), "embedding[500][3]") {
		t.Fatalf("error %v after %d rows; want the reader's non_finite on embedding[500][3] after 500", err, reader.Rows())
	}
	var count int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM dw_go_abort").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 0 {
		t.Fatalf("PostgreSQL kept %d rows of an aborted COPY", count)
	}
}

// The README's example, run against the real server.
func TestPgxReadmeExample(t *testing.T) {
	conn := pgConn(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE items (id int8 PRIMARY KEY, embedding vector(3))"); err != nil {
		t.Fatal(err)
	}
	vectors, _ := densewire.FromRows([][]float32{{1, -2.5, 0.1}, {3, 0.5, -1}}, densewire.Float32)
	data, err := copyVectorsWithPgx(ctx, conn, vectors, []int64{7, 8})
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, "read back", data.Tensor, vectors)
	if len(data.IDs.Ints) != 2 || data.IDs.Ints[0] != 7 || data.IDs.Ints[1] != 8 {
		t.Fatalf("ids %v", data.IDs.Ints)
	}
}
