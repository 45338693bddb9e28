package tlcp_test

import (
	"fmt"
	"io"
	"log"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/tlcp"
)

// A TLCP server with a signing and an encryption certificate, and a client
// that verifies it.
func Example() {
	cert, err := tlcp.LoadX509KeyPair("site.sign.crt", "site.sign.key", "site.enc.crt", "site.enc.key")
	if err != nil {
		log.Fatal(err)
	}
	l, err := tlcp.Listen("tcp", ":8443", &tlcp.Config{Certificates: []tlcp.Certificate{cert}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c) // echo
			}()
		}
	}()

	roots := smx509.NewCertPool()
	// roots.AppendCertsFromPEM(caPEM)
	conn, err := tlcp.Dial("tcp", "gm.example.cn:8443", &tlcp.Config{RootCAs: roots})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	st := conn.ConnectionState()
	fmt.Println(tlcp.CipherSuiteName(st.CipherSuite), st.PeerCertificates[0].Subject)
}
