package tls13

import (
	"testing"
)

// BenchmarkHandshake measures whole handshakes, client and server in one
// process over loopback: full ones per group, and resumed ones.
func BenchmarkHandshake(b *testing.B) {
	for _, tc := range []struct {
		name   string
		group  CurveID
		resume bool
	}{
		{"full/curveSM2", CurveSM2, false},
		{"full/curveSM2MLKEM768", CurveSM2MLKEM768, false},
		{"resumed/curveSM2", CurveSM2, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			scfg, ccfg := serverConfig(b), clientConfig(b)
			ccfg.CurvePreferences = []CurveID{tc.group}
			if !tc.resume {
				scfg.SessionTicketsDisabled = true
			} else {
				ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
			}
			resumed := 0
			for b.Loop() {
				cli, srv := mustHandshake(b, scfg, ccfg)
				if tc.resume {
					// Read the ticket.
					exchange(b, cli, srv, []byte("x"))
					if !cli.ConnectionState().DidResume {
						resumed--
					}
					resumed++
				}
				cli.Close()
				srv.Close()
			}
			b.ReportMetric(float64(resumed), "resumed")
		})
	}
}

// BenchmarkThroughput measures bulk transfer of 64 KiB writes over an
// established connection, per suite.
func BenchmarkThroughput(b *testing.B) {
	for _, suite := range []uint16{TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3} {
		b.Run(CipherSuiteName(suite), func(b *testing.B) {
			ccfg := clientConfig(b)
			ccfg.CipherSuites = []uint16{suite}
			cli, srv := mustHandshake(b, serverConfig(b), ccfg)
			buf := make([]byte, 64<<10)
			done := make(chan struct{})
			go func() {
				defer close(done)
				rb := make([]byte, 64<<10)
				for {
					if _, err := srv.Read(rb); err != nil {
						return
					}
				}
			}()
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cli.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			cli.Close()
			<-done
		})
	}
}
