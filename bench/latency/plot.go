package main

import (
	"fmt"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writePlot writes a PNG of each contender's latency at p50, p99 and p99.9
// against the request rate (the baseline's too, which the others add to),
// on a logarithmic scale, a line per contender and percentile.
func writePlot(path string, rates []int, rows []row) error {
	p := plot.New()
	p.Title.Text = "latency of POSTs at fixed rates (open loop)"
	p.X.Label.Text = "requests per second"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	colors := map[string]color.Color{
		"stock": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, "caddy-ha": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		"haproxy": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, "direct": color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff},
	}
	dashes := [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}
	for _, name := range []string{"direct", "stock", "caddy-ha", "haproxy"} {
		for i, label := range []string{"p50", "p99", "p99.9"} {
			var pts plotter.XYs
			for _, r := range rows {
				if r.name != name {
					continue
				}
				ms := float64(r.total[i]) / float64(time.Millisecond)
				pts = append(pts, plotter.XY{X: float64(r.rate), Y: max(ms, 0.01)})
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = colors[name], colors[name]
			line.Dashes = dashes[i]
			p.Add(line, points)
			p.Legend.Add(fmt.Sprintf("%s %s", name, label), line)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min = 0
	p.X.Max = float64(rates[len(rates)-1]) * 1.05
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
