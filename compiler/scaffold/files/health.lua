-- Argo CD health of a tfcompile training job, read from its state ConfigMap (`<job>-state`),
-- where the job's launchers record each task's success or failure. Argo CD's health checks are
-- per kind and global, so this runs for every ConfigMap: any other ConfigMap is Healthy, as
-- ConfigMaps are without it.
--   Degraded     a task of the committed revision stopped retrying (failurePolicy)
--   Healthy      every task that makes the job succeed recorded success at that revision
--   Suspended    the job is suspended (suspend: true)
--   Progressing  otherwise: the job is training
local hs = {}
local labels = obj.metadata.labels or {}
if labels["app.kubernetes.io/managed-by"] ~= "tfcompile"
    or labels["app.kubernetes.io/component"] ~= "state" then
  hs.status = "Healthy"
  return hs
end
local annotations = obj.metadata.annotations or {}
local revision = annotations["tfcompile.dev/revision"] or ""
local tasks = annotations["tfcompile.dev/success-tasks"] or ""
local data = obj.data or {}
local failed = {}
for task, value in pairs(data) do
  local outcome, recorded, detail = string.match(value, "^(%S+) (%S+) ?(.*)$")
  if outcome == "failed" and recorded == revision then
    table.insert(failed, task .. " (" .. detail .. ")")
  end
end
if #failed > 0 then
  table.sort(failed)
  hs.status = "Degraded"
  hs.message = "failed for good: " .. table.concat(failed, ", ")
  return hs
end
local waiting = 0
local total = 0
for task in string.gmatch(tasks, "[^,]+") do
  total = total + 1
  if data[task] ~= "succeeded " .. revision then
    waiting = waiting + 1
  end
end
if total > 0 and waiting == 0 then
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
hs.message = "training revision " .. revision .. ": " .. (total - waiting) .. " of " .. total
  .. " tasks that end the job succeeded"
return hs
