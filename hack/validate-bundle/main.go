// Command validate-bundle runs, on an OLM bundle directory, the validators that
// `operator-sdk bundle validate --select-optional suite=operatorframework` runs: the
// default bundle validators (CSV, CRDs, bundle) and the operatorframework suite
// (OperatorHub metadata, standard capabilities and categories, good practices, APIs
// removed in the target Kubernetes version).  It prints one line per finding and exits
// 1 when any finding is an error (or, with -warnings-fail, a warning), as operator-sdk does.
//
// Usage: validate-bundle [-k8s-version 1.36] [-warnings-fail] BUNDLE_DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

// The operatorframework suite, by the names operator-sdk lists them under.
var suite = map[string]interfaces.Validator{
	"operatorhub":           validation.OperatorHubV2Validator,
	"capabilities":          validation.StandardCapabilitiesValidator,
	"categories":            validation.StandardCategoriesValidator,
	"good-practices":        validation.GoodPracticesValidator,
	"alpha-deprecated-apis": validation.AlphaDeprecatedAPIsValidator,
}

func main() {
	k8sVersion := flag.String("k8s-version", "", "Kubernetes version the bundle targets (removed-API checks)")
	warningsFail := flag.Bool("warnings-fail", false, "exit 1 on warnings too")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: validate-bundle [-k8s-version V] [-warnings-fail] BUNDLE_DIR")
		os.Exit(2)
	}
	bundle, err := manifests.GetBundleFromDir(flag.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR cannot load the bundle in %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}

	findings := 0
	failed := false
	report := func(validator string, results []errors.ManifestResult) {
		for _, result := range results {
			for _, finding := range result.Errors {
				fmt.Printf("ERROR [%s] %s: %s\n", validator, result.Name, finding.Error())
				findings++
				failed = true
			}
			for _, finding := range result.Warnings {
				fmt.Printf("WARN  [%s] %s: %s\n", validator, result.Name, finding.Error())
				findings++
				failed = failed || *warningsFail
			}
		}
	}

	objects := bundle.ObjectsToValidate()
	report("default", validation.DefaultBundleValidators.Validate(objects...))

	// NB: like operator-sdk, the optional validators also get every object of the
	// bundle and the optional values (the Kubernetes version).
	optional := append([]interface{}{}, objects...)
	for _, object := range bundle.Objects {
		optional = append(optional, object)
	}
	optional = append(optional, map[string]string{"k8s-version": *k8sVersion})
	names := make([]string, 0, len(suite))
	for name := range suite {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		report(name, suite[name].Validate(optional...))
	}

	fmt.Printf("validated %s (%s): %d findings, validators default,%v\n", flag.Arg(0), bundle.Name, findings, names)
	if failed {
		os.Exit(1)
	}
}
