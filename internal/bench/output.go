package bench

import (
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
	default:
		return fmt.Errorf("no table for %T", report)
	}
	return nil
}
