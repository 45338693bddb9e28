package tlcp

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/cpufeat"
	tjtls "github.com/tjfoc/gmsm/gmtls"
)

func TestBatchRecords(t *testing.T) {
	for _, tc := range []struct {
		n, lanes       int
		bytes, records int
	}{
		{1, 4, 1, 1},
		{4095, 4, 4095, 1},
		{8191, 4, 8191, 1},
		{8192, 4, 8192, 2},
		{16384, 4, 16384, 4},
		{16385, 4, 16385, 4},
		{28000, 4, 28000, 4},
		{65536, 4, 65536, 4},
		{65537, 4, 65536, 4},
		{1 << 20, 4, 65536, 4},
		// One lane: the usual full-size records.
		{16384, 1, 16384, 1},
		{65536, 1, 16384, 1},
		{100, 1, 100, 1},
	} {
		b, r := batchRecords(tc.n, tc.lanes)
		if b != tc.bytes || r != tc.records {
			t.Errorf("batchRecords(%d, %d) = %d bytes in %d records, want %d in %d", tc.n, tc.lanes, b, r, tc.bytes, tc.records)
		}
		if r > 0 && (b+r-1)/r > maxPlaintext {
			t.Errorf("batchRecords(%d, %d): records of %d bytes", tc.n, tc.lanes, (b+r-1)/r)
		}
	}
}

// bulkWrites are write sizes around the record and batch boundaries.
var bulkWrites = []int{1, 100, 2048, 2049, 4095, 4096, 8191, 8192, 16383, 16384, 16385, 28672, 32768, 65535, 65536, 65537, 100000, 262144}

func bulkPayload(t testing.TB) []byte {
	total := 0
	for _, n := range bulkWrites {
		total += n
	}
	p := make([]byte, total)
	if _, err := rand.Read(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeInPieces writes p in the sizes of bulkWrites.
func writeInPieces(w io.Writer, p []byte) error {
	for _, n := range bulkWrites {
		if _, err := w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// recordSizes returns the fragment lengths of the TLCP records in raw.
func recordSizes(t *testing.T, raw []byte) []int {
	t.Helper()
	_, sizes, _ := wireRecords(t, raw)
	return sizes
}

// wireRecords splits raw, bytes as sent on the wire, into TLCP records and
// returns their types and fragment lengths, and the bytes after the last
// whole record header (fewer than a header).
func wireRecords(t *testing.T, raw []byte) (types []recordType, sizes []int, rest []byte) {
	t.Helper()
	for len(raw) >= recordHeaderLen {
		n := int(raw[3])<<8 | int(raw[4])
		if len(raw) < recordHeaderLen+n {
			t.Fatalf("truncated record on the wire: %x", raw)
		}
		types = append(types, recordType(raw[0]))
		sizes = append(sizes, n)
		raw = raw[recordHeaderLen+n:]
	}
	return types, sizes, raw
}

// TestCBCBulkWrites sends writes of many sizes each way over ECC_SM4_CBC_SM3
// and checks that every byte arrives, and that the records of a bulk
// write are cut as batchRecords says.
func TestCBCBulkWrites(t *testing.T) {
	payload := bulkPayload(t)
	ccfg, scfg := suiteConfigs(t, ECC_SM4_CBC_SM3, false)
	client, server, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	errs := make(chan error, 2)
	go func() { errs <- writeInPieces(server, payload) }()
	go func() { errs <- writeInPieces(client, payload) }()
	for _, r := range []*Conn{client, server} {
		got := make([]byte, len(payload))
		r.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("the data read differs from the data written")
		}
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCBCBatchRecordLayout seals one 64 KiB and one 16 KiB write through a
// connection and checks the records that leave: as many as the encrypter
// has lanes (up to four), each no larger than 2^14 bytes of plaintext.
// Which encrypter runs, and so how many lanes it has, depends on the CPU:
// four with GFNI, AES-NI, the ARMv8 AES or SM4 instructions, one on
// loong64 and in purego builds (cpufeat.Plan.CBC).
func TestCBCBatchRecordLayout(t *testing.T) {
	ccfg, scfg := suiteConfigs(t, ECC_SM4_CBC_SM3, false)
	client, _, cerr, serr := handshakePair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	c := client.conn
	lanes := client.out.cipher.(*cbcRecord).enc.Lanes()
	wantLanes := 4
	if cpuPlan().CBC == cpufeat.CBCSerial {
		wantLanes = 1
	}
	if lanes != wantLanes {
		t.Fatalf("the CBC encrypter of this CPU (%s) has %d lanes, want %d", cpuPlan().Impl(cpufeat.SM4CBCEncrypt).Name, lanes, wantLanes)
	}
	for _, n := range []int{65536, 16384} {
		var sink bytes.Buffer
		client.conn = &captureConn{Conn: c, w: &sink}
		if _, err := client.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		sizes := recordSizes(t, sink.Bytes())
		// Write seals batch after batch; with one lane (no CBC kernel
		// that runs chains side by side on this CPU) each batch is one
		// full record.
		records := 0
		for left := n; left > 0; {
			b, r := batchRecords(left, lanes)
			left -= b
			records += r
		}
		if len(sizes) != records {
			t.Fatalf("%d bytes left in %d records (%v), want %d", n, len(sizes), sizes, records)
		}
		for _, sz := range sizes {
			if sz > maxCiphertext {
				t.Fatalf("record of %d bytes", sz)
			}
		}
		t.Logf("%d bytes with %d lanes: records of %v bytes", n, lanes, sizes)
	}
}

// captureConn keeps what is written instead of sending it.
type captureConn struct {
	net.Conn
	w io.Writer
}

func (c *captureConn) Write(b []byte) (int, error) { return c.w.Write(b) }

// TestInteropTjfocBulk sends writes of many sizes over ECC_SM4_CBC_SM3
// between our side and tjfoc gmtls, both ways: batched records must open
// for an independent implementation.
func TestInteropTjfocBulk(t *testing.T) {
	payload := bulkPayload(t)
	want := sha256.Sum256(payload)

	t.Run("our-server", func(t *testing.T) {
		l := listenCBC(t, serverConfig(t))
		done := serveOne(l, func(c net.Conn) error { return writeInPieces(c, payload) })
		conn, err := tjtls.Dial("tcp", l.Addr().String(), tjfocClientConfig(t))
		if err != nil {
			t.Fatalf("tjfoc client: %v", err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatalf("tjfoc client read: %v", err)
		}
		if sha256.Sum256(got) != want {
			t.Fatal("tjfoc read other data than we wrote")
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("our-client", func(t *testing.T) {
		l, err := tjtls.Listen("tcp", "127.0.0.1:0", tjfocServerConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// The tjfoc server reads everything and answers with its hash.
		done := serveOne(l, func(c net.Conn) error {
			got := make([]byte, len(payload))
			if _, err := io.ReadFull(c, got); err != nil {
				return err
			}
			sum := sha256.Sum256(got)
			_, err := c.Write(sum[:])
			return err
		})
		ccfg := clientConfig(t)
		ccfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
		conn, err := DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(), ccfg)
		if err != nil {
			t.Fatalf("our client: %v", err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		if err := writeInPieces(conn, payload); err != nil {
			t.Fatal(err)
		}
		var sum [sha256.Size]byte
		if _, err := io.ReadFull(conn, sum[:]); err != nil {
			t.Fatalf("reading tjfoc's answer: %v", err)
		}
		if sum != want {
			t.Fatal("tjfoc read other data than we wrote")
		}
		if err := <-done; err != nil {
			t.Fatalf("tjfoc server: %v", err)
		}
	})
}
