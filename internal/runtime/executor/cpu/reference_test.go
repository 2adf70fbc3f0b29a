package cpu

import (
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// reference is the straightforward forward pass the executor is checked
// against: one token at a time, contiguous KV, float64 throughout, weights
// decoded from the model's tensors.
type reference struct {
	c      model.Config
	embed  [][]float64
	norm   []float64
	head   [][]float64
	layers []refLayer
}

type refLayer struct {
	attnNorm, ffnNorm []float64
	q, k, v, o        [][]float64
	gate, up, down    [][]float64
	qb, kb, vb        []float64
	keys, values      [][]float64 // per position
}

func rows(t *model.Tensor) [][]float64 {
	if t == nil {
		return nil
	}
	f := t.Float32()
	out := make([][]float64, t.Rows())
	for r := range out {
		out[r] = make([]float64, t.Cols())
		for c := range out[r] {
			out[r][c] = float64(f[r*t.Cols()+c])
		}
	}
	return out
}

func vec(t *model.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return rows(t)[0]
}

func newReference(m *model.Model) *reference {
	w := &m.Weights
	r := &reference{c: m.Config, embed: rows(w.TokenEmbedding), norm: vec(w.OutputNorm), head: rows(w.Output)}
	if r.head == nil {
		r.head = r.embed
	}
	for _, l := range w.Layers {
		r.layers = append(r.layers, refLayer{
			attnNorm: vec(l.AttnNorm), ffnNorm: vec(l.FFNNorm),
			q: rows(l.Q), k: rows(l.K), v: rows(l.V), o: rows(l.O),
			gate: rows(l.Gate), up: rows(l.Up), down: rows(l.Down),
			qb: vec(l.QBias), kb: vec(l.KBias), vb: vec(l.VBias),
		})
	}
	return r
}

func refMatVec(w [][]float64, x, bias []float64) []float64 {
	out := make([]float64, len(w))
	for r, row := range w {
		for c, v := range row {
			out[r] += v * x[c]
		}
		if bias != nil {
			out[r] += bias[r]
		}
	}
	return out
}

func refNorm(x, w []float64, eps float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv * w[i]
	}
	return out
}

func (r *reference) rope(x []float64, pos int) {
	hd := r.c.HeadDim
	for h := 0; h < len(x)/hd; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := range hd / 2 {
			a, b := 2*i, 2*i+1
			if r.c.RopeNeox() {
				a, b = i, i+hd/2
			}
			ang := float64(pos) * math.Pow(float64(r.c.RopeTheta), -2*float64(i)/float64(hd))
			x0, x1 := v[a], v[b]
			v[a] = x0*math.Cos(ang) - x1*math.Sin(ang)
			v[b] = x0*math.Sin(ang) + x1*math.Cos(ang)
		}
	}
}

// next feeds the token at the next position and returns its logits.
func (r *reference) next(tok int32) []float64 {
	c := r.c
	hd := c.HeadDim
	x := append([]float64(nil), r.embed[tok]...)
	for li := range r.layers {
		l := &r.layers[li]
		pos := len(l.keys)
		xn := refNorm(x, l.attnNorm, c.NormEps)
		q, k, v := refMatVec(l.q, xn, l.qb), refMatVec(l.k, xn, l.kb), refMatVec(l.v, xn, l.vb)
		r.rope(q, pos)
		r.rope(k, pos)
		l.keys, l.values = append(l.keys, k), append(l.values, v)
		attn := make([]float64, len(q))
		for h := range c.Heads {
			g := h / (c.Heads / c.KVHeads)
			qh := q[h*hd : (h+1)*hd]
			scores := make([]float64, pos+1)
			maxv := math.Inf(-1)
			for j := range scores {
				for i, qv := range qh {
					scores[j] += qv * l.keys[j][g*hd+i]
				}
				scores[j] /= math.Sqrt(float64(hd))
				maxv = max(maxv, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - maxv)
				sum += scores[j]
			}
			for j, s := range scores {
				for i := range hd {
					attn[h*hd+i] += s / sum * l.values[j][g*hd+i]
				}
			}
		}
		for i, v := range refMatVec(l.o, attn, nil) {
			x[i] += v
		}
		xn = refNorm(x, l.ffnNorm, c.NormEps)
		g, u := refMatVec(l.gate, xn, nil), refMatVec(l.up, xn, nil)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		for i, v := range refMatVec(l.down, g, nil) {
			x[i] += v
		}
	}
	return refMatVec(r.head, refNorm(x, r.norm, c.NormEps), nil)
}
