// Evaluates IAM requests with @cloud-copilot/iam-simulate, one JSON object per line.
//
// The engine is AGPL-3.0-or-later: a devDependency of package.json for the tests only, never
// shipped (not in the training image, the notebook asset or the CDK app).
//
// stdin:  {"id": 1, "simulation": {request, identityPolicies, resourcePolicy?, ...}}
// stdout: {"id": 1, "result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied",
//          "decisive": [...statements that decided it], "nearMisses": [...]}
//      or {"id": 1, "error": ...} when the engine refuses the request (an unknown action, an
//          ARN of a resource type the action does not take, a context key it does not know).
import readline from 'node:readline'
import { runSimulation } from '@cloud-copilot/iam-simulate'

function describe(analysis, kind) {
  const policy = analysis.policyId ?? (kind === 'resource' ? 'policy' : '')
  return `${kind} ${policy} statement ${analysis.explain?.identifier ?? ''}`.trim()
}

function failedConditions(analysis) {
  return (analysis.explain?.conditions ?? [])
    .filter((c) => !c.matches)
    .map((c) => `${c.operator} ${c.conditionKeyValue}` +
      (c.failedBecauseMissing ? ' (the request has no such key)' : ''))
}

function summarize(response) {
  // A request on '*' (an action without a resource type) comes back as a 'wildcard' result.
  const analysis = (response.result ?? response.results?.[0])?.analysis ?? {}
  const decisive = []
  const nearMisses = []
  for (const [kind, part] of [['identity', analysis.identityAnalysis],
                              ['resource', analysis.resourceAnalysis]]) {
    if (!part) continue
    for (const s of part.denyStatements ?? []) decisive.push('Deny by ' + describe(s, kind))
    for (const s of part.allowStatements ?? []) decisive.push('Allow by ' + describe(s, kind))
    for (const s of part.unmatchedStatements ?? []) {
      // Statements that name the action and the resource but whose conditions failed.
      if (s.actionMatch && s.resourceMatch && s.statement?.effect?.() !== 'Deny') {
        const failed = failedConditions(s)
        if (failed.length) nearMisses.push(`${describe(s, kind)}: ${failed.join('; ')}`)
      }
    }
  }
  return { decisive, nearMisses, resourceResult: analysis.resourceAnalysis?.result }
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  if (!line.trim()) continue
  let id = null
  let out
  try {
    const message = JSON.parse(line)
    id = message.id
    const response = await runSimulation(message.simulation, {})
    if (response.resultType === 'error') {
      out = { id, error: response.errors }
    } else {
      // Keys the engine ignored are not keys of this action and resource: a mistake in the table.
      const ignored = (response.result ?? response.results?.[0])?.ignoredContextKeys ?? []
      out = ignored.length
        ? { id, error: { message: 'context keys unknown for this action and resource', keys: ignored } }
        : { id, result: response.overallResult, ...summarize(response) }
    }
  } catch (error) {
    out = { id, error: String(error?.stack ?? error) }
  }
  // The engine's own CPU so far (user + system, seconds): the pytest side counts it for the test
  // that asked (tests/cpu_time.py).
  const cpu = process.cpuUsage()
  out.cpuSeconds = (cpu.user + cpu.system) / 1e6
  process.stdout.write(JSON.stringify(out) + '\n')
}
