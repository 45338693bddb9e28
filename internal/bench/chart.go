package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Colours: GM algorithms in one hue, the others in another, so that the
// comparison reads at a glance.
const (
	colourGM    = "#c0392b"
	colourOther = "#2e6da4"
)

var lineColours = []string{"#c0392b", "#2e6da4", "#e67e22", "#2ca02c", "#8e44ad", "#8c564b", "#7f7f7f", "#e377c2"}

// bar is one bar of a horizontal bar chart.
type bar struct {
	label  string
	value  float64
	colour string
	text   string
}

// series is one line of a line chart.
type series struct {
	name   string
	points [][2]float64 // x, y
}

// svgDoc lays out panels one under the other.
type svgDoc struct {
	body   bytes.Buffer
	y      float64
	width  float64
	title  string
	footer string
}

const (
	chartWidth = 900.0
	barHeight  = 18.0
	barGap     = 6.0
)

func newSVG(title, footer string) *svgDoc {
	d := &svgDoc{width: chartWidth, title: title, footer: footer}
	d.y = 40
	return d
}

func (d *svgDoc) text(x, y float64, anchor, style, s string) {
	fmt.Fprintf(&d.body, `<text x="%.1f" y="%.1f" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, style, html.EscapeString(s))
}

// textWidth estimates the width of s at font-size 12.
func textWidth(s string) float64 { return float64(len([]rune(s)))*7.6 + 4 }

// bars draws a horizontal bar chart, its labels and values fitted to the
// longest of each.
func (d *svgDoc) bars(title string, bs []bar) {
	if len(bs) == 0 {
		return
	}
	d.y += 24
	d.text(10, d.y, "start", `font-weight="bold" font-size="15"`, title)
	d.y += 12
	maxV, labelW, valueW := 0.0, 100.0, 40.0
	for _, b := range bs {
		maxV = max(maxV, b.value)
		labelW = max(labelW, textWidth(b.label)+18)
		valueW = max(valueW, textWidth(b.text)+10)
	}
	if maxV <= 0 {
		maxV = 1
	}
	span := max(d.width-labelW-valueW-10, 100)
	for _, b := range bs {
		w := b.value / maxV * span
		d.text(labelW-8, d.y+barHeight-5, "end", `font-size="12"`, b.label)
		fmt.Fprintf(&d.body, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", labelW, d.y, math.Max(w, 1), barHeight, b.colour)
		d.text(labelW+w+6, d.y+barHeight-5, "start", `font-size="12"`, b.text)
		d.y += barHeight + barGap
	}
}

// niceStep rounds a tick interval up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// lines draws a line chart with a logarithmic x axis (message sizes).
func (d *svgDoc) lines(title, yUnit string, ss []series) {
	if len(ss) == 0 {
		return
	}
	d.y += 24
	d.text(10, d.y, "start", `font-weight="bold" font-size="15"`, title)
	d.y += 16
	var xs []float64
	maxY := 0.0
	for _, s := range ss {
		for _, p := range s.points {
			if !slices.Contains(xs, p[0]) {
				xs = append(xs, p[0])
			}
			maxY = max(maxY, p[1])
		}
	}
	slices.Sort(xs)
	step := niceStep(maxY / 4)
	maxY = math.Max(math.Ceil(maxY/step), 1) * step
	d.text(10, d.y+4, "start", `font-size="11" fill="#555"`, yUnit)
	d.y += 14
	left, top, plotW, plotH := 70.0, d.y, d.width-70-230, 260.0
	minX, maxX := math.Log2(xs[0]), math.Log2(xs[len(xs)-1])
	if maxX == minX {
		maxX = minX + 1
	}
	px := func(x float64) float64 { return left + (math.Log2(x)-minX)/(maxX-minX)*plotW }
	py := func(y float64) float64 { return top + plotH - y/maxY*plotH }
	fmt.Fprintf(&d.body, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, top, plotW, plotH)
	for v := 0.0; v <= maxY*(1+1e-9); v += step {
		y := py(v)
		fmt.Fprintf(&d.body, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y, left+plotW, y)
		d.text(left-6, y+4, "end", `font-size="11"`, num(v))
	}
	for _, x := range xs {
		d.text(px(x), top+plotH+16, "middle", `font-size="11"`, sizeLabel(int(x)))
	}
	for i, s := range ss {
		c := lineColours[i%len(lineColours)]
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		fmt.Fprintf(&d.body, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		for _, p := range s.points {
			fmt.Fprintf(&d.body, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(p[0]), py(p[1]), c)
		}
		ly := top + 10 + float64(i)*18
		fmt.Fprintf(&d.body, `<rect x="%.1f" y="%.1f" width="14" height="4" fill="%s"/>`+"\n", left+plotW+16, ly-4, c)
		d.text(left+plotW+36, ly+2, "start", `font-size="12"`, s.name)
	}
	d.y = top + plotH + 30
}

func (d *svgDoc) String() string {
	var b bytes.Buffer
	h := d.y + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", d.width, h, d.width, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="24" font-size="17" font-weight="bold">%s</text>`+"\n", html.EscapeString(d.title))
	b.Write(d.body.Bytes())
	fmt.Fprintf(&b, `<text x="10" y="%.1f" font-size="11" fill="#555">%s</text>`+"\n", h-14, html.EscapeString(d.footer))
	b.WriteString("</svg>\n")
	return b.String()
}

func isGM(alg string) bool {
	return strings.HasPrefix(alg, "SM") || strings.Contains(alg, "TLCP") || strings.HasPrefix(alg, "ECC_") || strings.HasPrefix(alg, "ECDHE_")
}

func colourFor(alg string) string {
	if isGM(alg) {
		return colourGM
	}
	return colourOther
}

// cryptoSVG draws a crypto report.
func cryptoSVG(r *CryptoReport) string {
	m := r.Machine
	d := newSVG(fmt.Sprintf("GM crypto per core: %s", m.CPUModel),
		fmt.Sprintf("gmgate bench crypto, %s, %s/%s, gmsm %s, pinned to CPU %d, %s per figure", m.GoVersion, m.GOOS, m.GOARCH, m.GMSMVersion, r.PinnedCPU, seconds(r.DurationSeconds)))
	var pk []bar
	for _, res := range resultsIn(r.Results, GroupPublicKey) {
		pk = append(pk, bar{res.Algorithm + " " + res.Operation, res.OpsPerSec, colourFor(res.Algorithm), num(res.OpsPerSec) + " ops/s"})
	}
	d.bars("Public-key operations per core (ops/s)", pk)
	d.lines("SM2 encryption by message size (ops/s per core)", "ops/s", seriesBySize(resultsIn(r.Results, GroupSM2PKE), func(c CryptoResult) float64 { return c.OpsPerSec }))
	d.lines("Throughput by message size (MB/s per core)", "MB/s", seriesBySize(resultsIn(r.Results, GroupThroughput), func(c CryptoResult) float64 { return c.MBPerSec }))
	var be []bar
	for _, res := range resultsIn(r.Results, GroupBackend) {
		be = append(be, bar{res.Backend + ": " + res.Operation, res.OpsPerSec, colourGM, num(res.OpsPerSec) + " ops/s"})
	}
	d.bars("Server private-key operations through accel (ops/s per core)", be)
	return d.String()
}

func seriesBySize(rs []CryptoResult, value func(CryptoResult) float64) []series {
	var out []series
	idx := map[string]int{}
	for _, res := range rs {
		name := res.Algorithm + " " + res.Operation
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, series{name: name})
		}
		out[i].points = append(out[i].points, [2]float64{float64(res.Size), value(res)})
	}
	return out
}

// WriteChartFile writes a chart of any report gmgate bench writes: an HTML page with the chart and the table when the
// name ends in .html or .htm, else a standalone SVG.
func WriteChartFile(name string, report any) error {
	var svg, title string
	var tableText bytes.Buffer
	switch r := report.(type) {
	case *CryptoReport:
		svg, title = cryptoSVG(r), "gmgate bench crypto"
		WriteCryptoTable(&tableText, r)
	case *HandshakeReport:
		svg, title = handshakeSVG(r), "gmgate bench handshake"
		WriteHandshakeTable(&tableText, r)
	case *ProxyReport:
		svg, title = proxySVG(r), "gmgate bench proxy"
		WriteProxyTable(&tableText, r)
	case *DownloadReport:
		svg, title = downloadSVG(r), "gmgate bench download"
		WriteDownloadTable(&tableText, r)
	case *IdleReport:
		svg, title = idleSVG(r), "gmgate bench idle-conns"
		WriteIdleTable(&tableText, r)
	default:
		return fmt.Errorf("no chart for %T", report)
	}
	out := svg
	switch strings.ToLower(filepath.Ext(name)) {
	case ".html", ".htm":
		out = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.EscapeString(title) + "</title></head>\n" +
			"<body style=\"font-family:sans-serif\">\n" + svg + "<pre>" + html.EscapeString(tableText.String()) + "</pre>\n</body></html>\n"
	}
	if err := os.WriteFile(name, []byte(out), 0o644); err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}
