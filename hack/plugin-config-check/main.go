// plugin-config-check parses device plugin config files with NVIDIA's own parser
// (github.com/NVIDIA/k8s-device-plugin/api/config/v1, the version go.mod pins) and applies
// the checks the plugin's main makes of a parsed config before it starts
// (cmd/nvidia-device-plugin/main.go validateFlags: MPS needs an MPS root and refuses the mixed
// MIG strategy).  For each file argument it prints one JSON line: the file, whether it is
// accepted, the error if not, and the config's sharing strategy.  Exit status 0 when every file
// is accepted, 1 otherwise.  Used by tests/unit/test_plugin_config_upstream.py.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
)

type verdict struct {
	File     string `json:"file"`
	Accepted bool   `json:"accepted"`
	Error    string `json:"error,omitempty"`
	Sharing  string `json:"sharing,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
}

func check(file string, mpsRoot string) verdict {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config-file", Value: file},
		&cli.StringFlag{Name: "mps-root", Value: mpsRoot},
	}
	var result verdict
	result.File = file
	app := &cli.App{
		Flags: flags,
		Action: func(c *cli.Context) error {
			config, err := spec.NewConfig(c, flags)
			if err != nil {
				return err
			}
			// The plugin's own checks of a parsed config (main.go validateFlags).
			if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
				if config.Flags.MigStrategy != nil && *config.Flags.MigStrategy == spec.MigStrategyMixed {
					return fmt.Errorf("using --mig-strategy=mixed is not supported with MPS")
				}
				if mpsRoot == "" && (config.Flags.MpsRoot == nil || *config.Flags.MpsRoot == "") {
					return fmt.Errorf("using MPS requires --mps-root to be specified")
				}
			}
			result.Sharing = string(config.Sharing.SharingStrategy())
			for _, r := range config.Sharing.ReplicatedResources().Resources {
				if r.Replicas > result.Replicas {
					result.Replicas = r.Replicas
				}
			}
			return nil
		},
	}
	if err := app.Run([]string{"plugin-config-check"}); err != nil {
		result.Error = err.Error()
		return result
	}
	result.Accepted = true
	return result
}

func main() {
	// MPS_ROOT as the operator sets it on the plugin (devicePlugin.mps.root).
	mpsRoot := os.Getenv("MPS_ROOT")
	failed := false
	for _, file := range os.Args[1:] {
		result := check(file, mpsRoot)
		failed = failed || !result.Accepted
		line, _ := json.Marshal(result)
		fmt.Println(string(line))
	}
	if failed {
		os.Exit(1)
	}
}
