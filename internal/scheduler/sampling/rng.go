package sampling

import "math/bits"

// RNG is a xoshiro256** pseudo-random generator, seeded through splitmix64
// as its authors recommend. It is a small value type: a request owns its
// stream, copying an RNG forks it, and drawing allocates nothing. Not safe
// for concurrent use.
type RNG struct {
	s [4]uint64
}

// NewRNG returns the generator for seed; equal seeds give equal streams.
func NewRNG(seed uint64) RNG {
	var r RNG
	for i := range r.s {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		r.s[i] = z ^ z>>31
	}
	return r
}

// Uint64 returns the next 64 random bits. The zero RNG, which xoshiro would
// never leave, behaves as NewRNG(0).
func (r *RNG) Uint64() uint64 {
	if r.s == [4]uint64{} {
		*r = NewRNG(0)
	}
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// Float64 returns a uniform number in [0, 1) with 53 random bits.
func (r *RNG) Float64() float64 {
	return float64(r.Uint64()>>11) * 0x1p-53
}
