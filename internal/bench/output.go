package bench

import (
	"encoding/json"
	"fmt"
	"io"
)

// Output says how a report is written: a text table, or JSON, and
// optionally a chart file besides.
type Output struct {
	JSON  bool
	Chart string
}

// Write writes a *CryptoReport or *HandshakeReport to w (and the chart to
// its file).
func (o Output) Write(w io.Writer, report any) error {
	if o.Chart != "" {
		if err := WriteChartFile(o.Chart, report); err != nil {
			return err
		}
	}
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
