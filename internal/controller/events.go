package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// pendingEvent is an Event to record once the status that explains it is written.
type pendingEvent struct {
	eventType string
	reason    string
	action    string
	message   string
}

// conditionEvents returns one event per condition whose status or reason
// changed between before and after: transitions, not states, so a steady
// pool records nothing. Bad news is a Warning.
func conditionEvents(before, after []metav1.Condition) []pendingEvent {
	var events []pendingEvent
	for _, c := range after {
		prev := meta.FindStatusCondition(before, c.Type)
		if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason {
			continue
		}
		if prev == nil && !isBadNews(c) {
			// A new pool's first Progressing or PolicyResolved=True is not
			// news.
			continue
		}
		t := corev1.EventTypeNormal
		if isBadNews(c) {
			t = corev1.EventTypeWarning
		}
		events = append(events, pendingEvent{eventType: t, reason: c.Reason, action: c.Type, message: c.Message})
	}
	return events
}

func isBadNews(c metav1.Condition) bool {
	switch c.Type {
	case servingv1alpha1.PoolDegraded:
		return c.Status == metav1.ConditionTrue
	case servingv1alpha1.PoolPolicyResolved:
		return c.Status == metav1.ConditionFalse
	case servingv1alpha1.PoolModelReady:
		return c.Reason == servingv1alpha1.ReasonModelFetchFailed
	}
	return false
}
