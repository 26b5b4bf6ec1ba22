-- Argo CD health of a tfcompile training job, read from its state ConfigMap (`<job>-state`),
-- where the job's launchers record each task's success or failure. Argo CD's health checks are
-- per kind and global, so this runs for every ConfigMap: any other ConfigMap is Healthy, as
-- ConfigMaps are without it.
--   Degraded     a task of the committed revision stopped retrying (failurePolicy)
--   Healthy      every task that makes the job succeed recorded success at that revision
--   Suspended    the job is suspended (suspend: true)
--   Progressing  otherwise: the job is training (with the progress its training reports)
-- A job with `launcher: none` records nothing (its state says `tfcompile.dev/launcher: none`):
-- its state is Healthy (Suspended when suspended), and its StatefulSets' health is the job's.
-- Argo CD runs health checks with only Lua's base, table and package libraries (no `string`),
-- so everything here is read by equality: a task's record is "succeeded <revision>" exactly,
-- and the launcher that records a final failure also sets `failed-revision` and `failed-task`.
local hs = {}
local labels = obj.metadata.labels or {}
if labels["app.kubernetes.io/managed-by"] ~= "tfcompile"
    or labels["app.kubernetes.io/component"] ~= "state" then
  hs.status = "Healthy"
  return hs
end
local annotations = obj.metadata.annotations or {}
local revision = annotations["tfcompile.dev/revision"] or ""
local listed = annotations["tfcompile.dev/success-tasks"] or ""
local data = obj.data or {}
if annotations["tfcompile.dev/launcher"] == "none" then
  if annotations["tfcompile.dev/suspended"] == "true" then
    hs.status = "Suspended"
    hs.message = "suspended"
    return hs
  end
  hs.status = "Healthy"
  hs.message = "runs without tfcompile's launcher: nothing records success or failure"
  return hs
end
if data["failed-revision"] == revision then
  hs.status = "Degraded"
  hs.message = "failed for good: " .. (data["failed-task"] or "a task")
  return hs
end
-- The tasks that end the job are one role's, numbered from 0 ("chief-0", or
-- "worker-0,worker-1,..."): the role whose list, written out, is the annotation.
local tasks = {}
for _, role in ipairs({"chief", "worker", "ps", "evaluator"}) do
  local names = {}
  local length = -1
  while length < #listed do
    local name = role .. "-" .. #names
    table.insert(names, name)
    length = length + 1 + #name
  end
  if table.concat(names, ",") == listed then
    tasks = names
    break
  end
end
local done = 0
for _, task in ipairs(tasks) do
  if data[task] == "succeeded " .. revision then
    done = done + 1
  end
end
if #tasks > 0 and done == #tasks then
  hs.status = "Healthy"
  hs.message = "succeeded at revision " .. revision
  return hs
end
if annotations["tfcompile.dev/suspended"] == "true" then
  hs.status = "Suspended"
  hs.message = "suspended"
  return hs
end
hs.status = "Progressing"
hs.message = "training revision " .. revision .. ": " .. done .. " of " .. #tasks
  .. " tasks that end the job succeeded"
-- The progress the first of those tasks reported at this revision (its launcher records the
-- line and, beside it, the revision it is of).
for _, task in ipairs(tasks) do
  local line = data[task .. ".progress"]
  if line ~= nil and data[task .. ".progress-revision"] == revision then
    hs.message = hs.message .. "; " .. task .. ": " .. line
    break
  end
end
return hs
