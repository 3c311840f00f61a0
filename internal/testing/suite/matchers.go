package suite

import (
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HaveCondition matches a list of conditions that holds one of type t with status and reason.
func HaveCondition(t string, status metav1.ConditionStatus, reason string) gomega.OmegaMatcher {
	return gomega.WithTransform(func(cs []metav1.Condition) string {
		if c := meta.FindStatusCondition(cs, t); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return ""
	}, gomega.Equal(string(status)+"/"+reason))
}
