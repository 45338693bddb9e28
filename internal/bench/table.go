package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// table is a text table whose columns are padded to their widest cell;
// numeric columns are right-aligned.
type table struct {
	header []string
	right  []bool
	rows   [][]string
}

func newTable(header ...string) *table {
	t := &table{header: header, right: make([]bool, len(header))}
	for i := 1; i < len(header); i++ {
		t.right[i] = true
	}
	return t
}

// leftAlign makes the first n columns left-aligned (text).
func (t *table) leftAlign(n int) *table {
	for i := 0; i < n && i < len(t.right); i++ {
		t.right[i] = false
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, indent string) {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	line := func(r []string) {
		var b strings.Builder
		b.WriteString(indent)
		for i := range widths {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if t.right[i] {
				b.WriteString(pad + c)
			} else if i < len(widths)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
}

// num formats a rate or a time: whole numbers from 100 on, three
// significant digits below.
// ms is a latency for a table: "-" when nothing was measured (a row whose
// every attempt failed), where 0 would read as instant.
func ms(v float64, measured bool) string {
	if !measured {
		return "-"
	}
	return num(v)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v >= 100 || v == 0:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// sizeLabel writes a byte count the way tables head their columns.
func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
