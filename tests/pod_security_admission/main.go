// The Pod Security admission's own policy evaluation, for tests: reads a JSON list of pod
// templates on stdin and prints the highest level each meets ("restricted", "baseline" or
// "privileged") under the latest policy version. Built at test time against
// k8s.io/pod-security-admission in the Go module cache, so tfcompile's evaluation is compared
// with the real one.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

func main() {
	var templates []corev1.PodTemplateSpec
	if err := json.NewDecoder(os.Stdin).Decode(&templates); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		panic(err)
	}
	levels := []string{}
	for _, template := range templates {
		level := "privileged"
		for _, candidate := range []api.Level{api.LevelRestricted, api.LevelBaseline} {
			results := evaluator.EvaluatePod(api.LevelVersion{Level: candidate, Version: api.LatestVersion()}, &template.ObjectMeta, &template.Spec)
			if policy.AggregateCheckResults(results).Allowed {
				level = string(candidate)
				break
			}
		}
		levels = append(levels, level)
	}
	json.NewEncoder(os.Stdout).Encode(levels)
}
