// promql-check parses PromQL expressions with Prometheus' own parser
// (github.com/prometheus/prometheus/promql/parser) and names the metrics each one reads.
//
// Input (stdin): a JSON object, name -> expression.
// Output (stdout): a JSON object, name -> {"error": "...", "metrics": [...]}.
// Exit status 0 even when an expression is invalid: the caller decides (tests/unit/test_alerts.py).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Error   string   `json:"error,omitempty"`
	Metrics []string `json:"metrics"`
}

func main() {
	var exprs map[string]string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: stdin is not a JSON object of name -> expression: %v\n", err)
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	out := make(map[string]result, len(exprs))
	for name, text := range exprs {
		expr, err := p.ParseExpr(text)
		if err != nil {
			out[name] = result{Error: err.Error(), Metrics: []string{}}
			continue
		}
		seen := map[string]bool{}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			if selector, ok := node.(*parser.VectorSelector); ok {
				// A selector without a metric name (`{job="x"}`) reads every metric: report it as "".
				seen[selector.Name] = true
			}
			return nil
		})
		metrics := make([]string, 0, len(seen))
		for metric := range seen {
			metrics = append(metrics, metric)
		}
		sort.Strings(metrics)
		out[name] = result{Metrics: metrics}
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: %v\n", err)
		os.Exit(2)
	}
}
