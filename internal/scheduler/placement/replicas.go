package placement

// recommendReplicas computes Decision.RecommendedReplicas once the round is
// decided. A waiting program fits on no pod when its footprint exceeds every
// serving pod's remaining capacity; marked tokens still count as used, since
// the programs holding them will wait for a pod themselves.
func (s *Scheduler) recommendReplicas() int {
	serving, perPod, mostRoom := 0, int64(0), int64(0)
	for i := range s.pods {
		p := &s.pods[i]
		if !p.serving {
			continue
		}
		if serving == 0 || p.remaining() > mostRoom {
			mostRoom = p.remaining()
		}
		serving++
		perPod = max(perPod, p.total)
	}
	waiting := false
	var unfit int64
	for i := range s.progs {
		ps := &s.progs[i]
		if ps.pod >= 0 {
			continue
		}
		waiting = true
		if serving > 0 && ps.footprint > mostRoom && ps.footprint <= perPod {
			unfit += ps.footprint
		}
	}
	switch {
	case serving == 0 && waiting:
		return 1
	case serving == 0 || perPod == 0:
		return serving
	}
	return serving + int((unfit+perPod-1)/perPod)
}
