package demo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// printTable prints an API server table the way kubectl get does: upper-case headers, the
// columns of priority 0, three spaces between columns.
func printTable(out io.Writer, t *metav1.Table) error {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	var keep []int
	var header []string
	for i, c := range t.ColumnDefinitions {
		if c.Priority == 0 {
			keep = append(keep, i)
			header = append(header, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, row := range t.Rows {
		cells := make([]string, 0, len(keep))
		for _, i := range keep {
			cell := "<none>"
			if i < len(row.Cells) && row.Cells[i] != nil {
				cell = fmt.Sprint(row.Cells[i])
			}
			cells = append(cells, cell)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}
