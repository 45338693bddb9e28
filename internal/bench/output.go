package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Output says how a report is written: a text table, or JSON, and
// optionally a chart file besides.
type Output struct {
	JSON  bool
	Chart string
}

// Check reports what would keep the chart file from being written, so
// that a run is refused before it measures rather than after.
func (o Output) Check() error {
	if o.Chart == "" {
		return nil
	}
	switch strings.ToLower(filepath.Ext(o.Chart)) {
	case ".svg", ".html", ".htm":
	default:
		return fmt.Errorf("--chart %s: a chart is an SVG image (.svg) or an HTML page with the table (.html); name the file so", o.Chart)
	}
	dir := filepath.Dir(o.Chart)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--chart %s: directory %s does not exist; create it or write the chart elsewhere", o.Chart, dir)
	case err != nil:
		return fmt.Errorf("--chart %s: %w", o.Chart, err)
	case !st.IsDir():
		return fmt.Errorf("--chart %s: %s is not a directory", o.Chart, dir)
	}
	return nil
}

// Write writes a *CryptoReport or *HandshakeReport to w, then the chart
// to its file: a chart that cannot be written costs the chart alone.
func (o Output) Write(w io.Writer, report any) error {
	if err := o.writeReport(w, report); err != nil {
		return err
	}
	if o.Chart != "" {
		return WriteChartFile(o.Chart, report)
	}
	return nil
}

func (o Output) writeReport(w io.Writer, report any) error {
	if o.JSON {
		return WriteJSON(w, report)
	}
	switch r := report.(type) {
	case *CryptoReport:
		WriteCryptoTable(w, r)
	case *HandshakeReport:
		WriteHandshakeTable(w, r)
	case *ProxyReport, *DownloadReport, *IdleReport:
		return WriteGatewayReport(w, r, false)
	default:
		return fmt.Errorf("no table for %T", report)
	}
	return nil
}

// ReadReport reads a report written with --json, of either kind, by its
// schema name.
func ReadReport(r io.Reader) (any, error) {
	data, err := io.ReadAll(io.LimitReader(r, 256<<20))
	if err != nil {
		return nil, err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a gmgate bench report: %w", err)
	}
	var report any
	switch head.Schema {
	case CryptoSchema:
		report = new(CryptoReport)
	case HandshakeSchema:
		report = new(HandshakeReport)
	case ProxySchema:
		report = new(ProxyReport)
	case DownloadSchema:
		report = new(DownloadReport)
	case IdleSchema:
		report = new(IdleReport)
	default:
		return nil, fmt.Errorf("not a gmgate bench report (schema %q; known: %s, %s, %s, %s, %s)", head.Schema, CryptoSchema, HandshakeSchema, ProxySchema, DownloadSchema, IdleSchema)
	}
	if err := json.Unmarshal(data, report); err != nil {
		return nil, fmt.Errorf("reading the %s report: %w", head.Schema, err)
	}
	return report, nil
}
