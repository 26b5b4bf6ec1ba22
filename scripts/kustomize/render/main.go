// Command tfcompile-kustomize renders many kustomizations in one process with Kustomize's own
// library (krusty, the package `kustomize build` runs and Flux's kustomize-controller embeds),
// so that `tfcompile validate` of many jobs pays Kustomize's start-up once and not per job.
// Most of a `kustomize build` of a job with components is that start-up: parsing Kubernetes'
// OpenAPI schema for strategic merges, which the library keeps once it has parsed it.
//
// Protocol, one request at a time: a line on standard input holding a JSON object, the
// directory to render and the working directory to name it from,
// {"directory":"jobs/a","workingDirectory":"/repository"}; the answer on standard output is a JSON line {"ok":true,"size":N} and
// then the N bytes `kustomize build DIRECTORY` prints, or {"ok":false,"size":N} and the N bytes
// of the error `kustomize build` prints after "Error: ". The process ends at the end of its
// input. Options are those of `kustomize build` without flags: root-only loading, no plugins,
// no Helm, the legacy order unless the kustomization sets its own.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
)

type request struct {
	Directory        string `json:"directory"`
	WorkingDirectory string `json:"workingDirectory"`
}

type answer struct {
	Ok   bool `json:"ok"`
	Size int  `json:"size"`
}

// options are `kustomize build`'s when no flag is given (its HonorKustomizeFlags).
func options() *krusty.Options {
	made := krusty.MakeDefaultOptions()
	made.Reorder = krusty.ReorderOptionUnspecified
	made.LoadRestrictions = types.LoadRestrictionsRootOnly
	made.PluginConfig.HelmConfig.Enabled = false
	made.PluginConfig.HelmConfig.Command = "helm"
	return made
}

func render(directory string) ([]byte, error) {
	// A kustomization's `openapi` field replaces the library's schema for the rest of the
	// process; the next directory must start from the built-in one, as a new process would.
	defer func() {
		if openapi.GetSchemaVersion() != openapi.DefaultOpenAPI {
			openapi.ResetOpenAPI()
		}
	}()
	resources, err := krusty.MakeKustomizer(options()).Run(filesys.MakeFsOnDisk(), directory)
	if err != nil {
		return nil, err
	}
	return resources.AsYaml()
}

func reply(output *bufio.Writer, ok bool, body []byte) error {
	header, err := json.Marshal(answer{Ok: ok, Size: len(body)})
	if err != nil {
		return err
	}
	if _, err := output.Write(append(header, '\n')); err != nil {
		return err
	}
	if _, err := output.Write(body); err != nil {
		return err
	}
	return output.Flush()
}

func serve(input io.Reader, output *bufio.Writer) error {
	lines := bufio.NewReader(input)
	for {
		line, err := lines.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			return nil
		}
		if err != nil && err != io.EOF {
			return err
		}
		var asked request
		if err := json.Unmarshal(line, &asked); err != nil || asked.Directory == "" || asked.WorkingDirectory == "" {
			return fmt.Errorf("a request is a JSON object with a directory and a workingDirectory, then a newline")
		}
		// As `kustomize build` started there: the directory and the messages name it alike.
		rendered, failure := []byte(nil), os.Chdir(asked.WorkingDirectory)
		if failure == nil {
			rendered, failure = render(asked.Directory)
		}
		if failure != nil {
			err = reply(output, false, []byte(failure.Error()))
		} else {
			err = reply(output, true, rendered)
		}
		if err != nil {
			return err
		}
	}
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Println(krustyVersion())
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: tfcompile-kustomize (requests on standard input) | tfcompile-kustomize version")
		os.Exit(2)
	}
	// Kustomize allocates much and keeps little between renderings: with the collector's
	// default (100) a job with the gpu and azure components took 0.032 s of processor time,
	// with 400 0.023 s, at a peak of 38 and 53 MB.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if err := serve(os.Stdin, bufio.NewWriter(os.Stdout)); err != nil {
		fmt.Fprintln(os.Stderr, "tfcompile-kustomize:", err)
		os.Exit(1)
	}
}

// krustyVersion is the version of Kustomize's library this program was built with.
func krustyVersion() string {
	if information, ok := debug.ReadBuildInfo(); ok {
		for _, dependency := range information.Deps {
			if dependency.Path == "sigs.k8s.io/kustomize/api" {
				return "sigs.k8s.io/kustomize/api " + dependency.Version
			}
		}
	}
	return "sigs.k8s.io/kustomize/api (version unknown)"
}
