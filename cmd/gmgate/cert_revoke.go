package main

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/certs/revocation"
	"github.com/spf13/cobra"
)

func init() {
	certCmd.AddCommand(newRevokeCmd(), newCRLCmd())
}

// Files of the revocation database and the CRL, in a CA directory.
const (
	revokedDBFile = "revoked.json"
	crlPEMFile    = "crl.pem"
	crlDERFile    = "crl.der"
)

// revokedDB is the CA's record of what it revoked, kept beside its keys
// as JSON: the input of every CRL it makes.
type revokedDB struct {
	// CRLNumber is the cRLNumber of the last CRL made.
	CRLNumber int64          `json:"crl_number"`
	Revoked   []revokedEntry `json:"revoked"`
}

type revokedEntry struct {
	// Serial is upper-case hex, as openssl prints it.
	Serial    string    `json:"serial"`
	RevokedAt time.Time `json:"revoked_at"`
	Reason    string    `json:"reason"`
	Subject   string    `json:"subject,omitempty"`
}

// readRevokedDB reads dir's database; a missing one is empty.
func readRevokedDB(dir string) (*revokedDB, error) {
	path := filepath.Join(dir, revokedDBFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &revokedDB{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseRevokedDB(path, data)
}

// parseRevokedDB reads the database from data, read from path.
func parseRevokedDB(path string, data []byte) (*revokedDB, error) {
	var db revokedDB
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&db); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v); restore it from a backup, or fix it by hand", path, err)
	}
	if db.CRLNumber < 0 || db.CRLNumber == math.MaxInt64 {
		return nil, fmt.Errorf("%s: crl_number %d is out of range; set it to the number of the last CRL made", path, db.CRLNumber)
	}
	for _, e := range db.Revoked {
		if _, err := parseSerial(e.Serial); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if _, err := revocation.ParseReason(e.Reason); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	return &db, nil
}

// write replaces dir's database in one step.
func (db *revokedDB) write(dir string) error {
	data, err := json.MarshalIndent(db, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, revokedDBFile), append(data, '\n'), 0o644)
}

// find returns the entry of a serial, if revoked.
func (db *revokedDB) find(serial *big.Int) *revokedEntry {
	for i := range db.Revoked {
		if s, _ := parseSerial(db.Revoked[i].Serial); s != nil && s.Cmp(serial) == 0 {
			return &db.Revoked[i]
		}
	}
	return nil
}

// lockCADir keeps two revoke or crl commands from losing each other's
// changes to the database; the returned function unlocks.
func lockCADir(dir string) (func(), error) {
	path := filepath.Join(dir, revokedDBFile+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%s exists: another gmgate cert revoke or crl is running on this CA; if none is, remove the file", path)
	}
	if err != nil {
		return nil, err
	}
	f.Close()
	return func() { os.Remove(path) }, nil
}

// writeFileAtomic writes a file through a temporary file and a rename,
// so that a reader sees the old or the new content, never a part.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// parseSerial reads a serial number in hex, as openssl x509 -serial
// prints it (serial=4A3F...), with or without colons or 0x.
func parseSerial(s string) (*big.Int, error) {
	v := strings.TrimSpace(s)
	v = strings.TrimPrefix(strings.TrimPrefix(v, "serial="), "0x")
	v = strings.ReplaceAll(v, ":", "")
	n, ok := new(big.Int).SetString(v, 16)
	if !ok || v == "" || n.Sign() <= 0 {
		return nil, fmt.Errorf("serial %q is not a positive hexadecimal number (as openssl x509 -noout -serial prints it)", s)
	}
	return n, nil
}

// serialText writes a serial as openssl prints it.
func serialText(n *big.Int) string {
	t := strings.ToUpper(n.Text(16))
	if len(t)%2 == 1 {
		t = "0" + t
	}
	return t
}

// issuingCert reads the certificate of the CA in dir that issues
// leaves: the intermediate when there is one, else the root.
func issuingCert(dir string) (*smx509.Certificate, error) {
	if dir == "" {
		return nil, errors.New("--ca is required: the directory made by gmgate cert init-ca")
	}
	file := filepath.Join(dir, pki.IntermediateCertFile)
	if _, err := os.Stat(file); err != nil {
		file = filepath.Join(dir, pki.CACertFile)
	}
	cs, err := certs.ReadRoots(file)
	if err != nil {
		return nil, fmt.Errorf("%v (create a CA with: gmgate cert init-ca --out %s)", err, dir)
	}
	return cs[0], nil
}

// readLeaf reads the first certificate of a PEM (or DER) file.
func readLeaf(path string) (*smx509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	der := data
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s holds a PEM %q, not a certificate", path, block.Type)
		}
		der = block.Bytes
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s is not a certificate: %v", path, err)
	}
	return c, nil
}

func newRevokeCmd() *cobra.Command {
	var (
		caDir, reason string
		serials       []string
	)
	cmd := &cobra.Command{
		Use:   "revoke --ca DIR CERT... | --serial HEX",
		Short: "Record certificates of a local CA as revoked (then make the CRL with gmgate cert crl)",
		Long: `Record certificates issued by a CA made with gmgate cert init-ca as revoked,
in DIR/revoked.json beside the CA (serial, time, reason). The change reaches
peers through the next CRL: run gmgate cert crl afterwards.

Give the certificate files, or their serial numbers in hex as
openssl x509 -noout -serial prints them. A TLCP client has two certificates
(signing and encryption): revoke both. The reason is one of unspecified,
keyCompromise, cACompromise, affiliationChanged, superseded,
cessationOfOperation, certificateHold, privilegeWithdrawn, aACompromise.`,
		Example: `  gmgate cert revoke --ca ca --reason keyCompromise client/alice.sign.crt client/alice.enc.crt
  gmgate cert revoke --ca ca --serial 4A3F0C7D9E21B6C8A5D4F3E2C1B0A998
  gmgate cert crl --ca ca`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(serials) == 0 {
				return errors.New("give the certificate files to revoke, or --serial HEX")
			}
			r, err := revocation.ParseReason(reason)
			if err != nil {
				return fmt.Errorf("--reason: %w", err)
			}
			issuer, err := issuingCert(caDir)
			if err != nil {
				return err
			}
			type target struct {
				serial  *big.Int
				subject string
			}
			var targets []target
			for _, f := range args {
				c, err := readLeaf(f)
				if err != nil {
					return err
				}
				if err := c.CheckSignatureFrom(issuer); err != nil {
					return fmt.Errorf("%s (%q) was not issued by the CA in %s (%q); revoke it at the CA that issued it", f, c.Subject.String(), caDir, issuer.Subject.String())
				}
				targets = append(targets, target{c.SerialNumber, c.Subject.String()})
			}
			for _, s := range serials {
				n, err := parseSerial(s)
				if err != nil {
					return fmt.Errorf("--serial: %w", err)
				}
				targets = append(targets, target{serial: n})
			}
			unlock, err := lockCADir(caDir)
			if err != nil {
				return err
			}
			defer unlock()
			db, err := readRevokedDB(caDir)
			if err != nil {
				return err
			}
			now := time.Now().UTC().Truncate(time.Second)
			for _, tg := range targets {
				if e := db.find(tg.serial); e != nil {
					return fmt.Errorf("serial %s is already revoked (at %s, %s); nothing was changed", serialText(tg.serial), e.RevokedAt.Format(time.RFC3339), e.Reason)
				}
				db.Revoked = append(db.Revoked, revokedEntry{Serial: serialText(tg.serial), RevokedAt: now, Reason: r.String(), Subject: tg.subject})
			}
			if err := db.write(caDir); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, tg := range targets {
				name := tg.subject
				if name == "" {
					name = "(given by serial)"
				}
				fmt.Fprintf(w, "revoked serial %s %s, reason %s\n", serialText(tg.serial), name, r)
			}
			fmt.Fprintf(w, "recorded in %s; next: gmgate cert crl --ca %s   (make the CRL that tells peers)\n", filepath.Join(caDir, revokedDBFile), caDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory (from gmgate cert init-ca)")
	f.StringVar(&reason, "reason", "unspecified", "revocation reason (RFC 5280 name, e.g. keyCompromise, superseded, cessationOfOperation)")
	f.StringSliceVar(&serials, "serial", nil, "serial number in hex of a certificate to revoke (repeat or comma-separate)")
	return cmd
}

func newCRLCmd() *cobra.Command {
	var (
		caDir, caPwFile, out string
		days                 int
	)
	cmd := &cobra.Command{
		Use:   "crl --ca DIR",
		Short: "Make the CRL of a local CA from the certificates revoked with gmgate cert revoke",
		Long: `Make and sign the certificate revocation list of a CA made with
gmgate cert init-ca, listing what gmgate cert revoke recorded: crl.pem and
crl.der in the CA directory (or --out). An SM2 CA signs it with
SM2-with-SM3 (GM/T 0015 profile, default user ID 1234567812345678), an
ECDSA or RSA CA with ECDSA or RSA; with an intermediate, the intermediate
signs it, as it issues the certificates. Each CRL has the next cRLNumber.

A CRL is valid until its nextUpdate (--days from now): make a new one
before then, for example weekly from cron, even when nothing was revoked.`,
		Example: `  gmgate cert crl --ca ca
  gmgate cert crl --ca ca --days 7 --out /etc/gmgate/crl --ca-key-password-file pw.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if days <= 0 || days > 366 {
				return fmt.Errorf("--days %d: give a number of days from 1 to 366", days)
			}
			ca, err := loadCA(caDir, caPwFile)
			if err != nil {
				return err
			}
			issuer, key := ca.Root, crypto.Signer(ca.RootKey)
			if ca.Intermediate != nil {
				issuer, key = ca.Intermediate, ca.IntermediateKey
			}
			if key == nil {
				return fmt.Errorf("the CA in %s has no key for %q; the CRL must be signed by the key that issues the certificates", caDir, issuer.Subject.String())
			}
			if out == "" {
				out = caDir
			}
			unlock, err := lockCADir(caDir)
			if err != nil {
				return err
			}
			defer unlock()
			db, err := readRevokedDB(caDir)
			if err != nil {
				return err
			}
			now := time.Now().UTC().Truncate(time.Second)
			tmpl := &smx509.RevocationList{
				Number:     big.NewInt(db.CRLNumber + 1),
				ThisUpdate: now,
				NextUpdate: now.Add(time.Duration(days) * 24 * time.Hour),
			}
			entries := append([]revokedEntry(nil), db.Revoked...)
			sort.SliceStable(entries, func(i, j int) bool { return entries[i].RevokedAt.Before(entries[j].RevokedAt) })
			for _, e := range entries {
				serial, _ := parseSerial(e.Serial)
				r, _ := revocation.ParseReason(e.Reason)
				tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, smx509.RevocationListEntry{
					SerialNumber: serial, RevocationTime: e.RevokedAt, ReasonCode: int(r)})
			}
			der, err := smx509.CreateRevocationList(rand.Reader, tmpl, issuer, key)
			if err != nil {
				return fmt.Errorf("signing the CRL: %v", err)
			}
			crl, err := revocation.ParseCRL(der, []*smx509.Certificate{issuer})
			if err != nil {
				return fmt.Errorf("the CRL just made does not verify: %v", err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			pemPath, derPath := filepath.Join(out, crlPEMFile), filepath.Join(out, crlDERFile)
			if err := writeFileAtomic(derPath, der, 0o644); err != nil {
				return err
			}
			if err := writeFileAtomic(pemPath, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644); err != nil {
				return err
			}
			db.CRLNumber++
			if err := db.write(caDir); err != nil {
				return err
			}
			printCRL(cmd.OutOrStdout(), crl, caDir, pemPath, derPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory (from gmgate cert init-ca)")
	f.StringVar(&caPwFile, "ca-key-password-file", "", "password file of encrypted CA keys")
	f.IntVar(&days, "days", 30, "days until the CRL's nextUpdate (1 to 366)")
	f.StringVar(&out, "out", "", "directory to write crl.pem and crl.der into (default: the CA directory)")
	return cmd
}

func printCRL(w io.Writer, crl *revocation.CRL, caDir, pemPath, derPath string) {
	fmt.Fprintf(w, "CRL number %s of %q (signed %s), listing %d revoked certificates, valid until %s\n",
		crl.Number, crl.Issuer.Subject.String(), crl.SignatureAlgorithm, crl.Len(), crl.NextUpdate.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "wrote %s, %s\n", pemPath, derPath)
	fmt.Fprintf(w, "make the next one before %s: gmgate cert crl --ca %s\n", crl.NextUpdate.UTC().Format(time.RFC3339), caDir)
}
