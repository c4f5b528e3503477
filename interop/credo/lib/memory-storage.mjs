// An in-memory StorageService for Credo 0.6, standing in for Askar's store (registered under
// InjectionSymbols.StorageService). Records are kept serialized, as a database would keep them,
// so that a record read back is a fresh instance and in-place changes are not saved by accident.
//
// Tag queries follow Askar's semantics as Credo uses them: a plain value must equal the tag, an
// array value must be a subset of the record's array tag, `undefined` puts no constraint, `null`
// asks for the tag to be absent, and $and / $or / $not combine sub-queries (an empty $or puts
// no constraint).

import { CredoError, JsonTransformer, RecordDuplicateError, RecordNotFoundError } from '@credo-ts/core'

export class InMemoryStorageService {
  // contextCorrelationId → Map(id → { type, value: JSON string, tags })
  #contexts = new Map()

  #records(agentContext) {
    let records = this.#contexts.get(agentContext.contextCorrelationId)
    if (!records) {
      records = new Map()
      this.#contexts.set(agentContext.contextCorrelationId, records)
    }
    return records
  }

  #entry(record) {
    const tags = {}
    for (const [k, v] of Object.entries(record.getTags())) {
      if (v !== undefined) tags[k] = Array.isArray(v) ? [...v] : v
    }
    return { type: record.type, value: JsonTransformer.serialize(record), tags }
  }

  #instance(id, entry, recordClass) {
    const instance = JsonTransformer.deserialize(entry.value, recordClass)
    instance.id = id
    instance.replaceTags(structuredClone(entry.tags))
    return instance
  }

  supportsLocking() {
    return false
  }

  async save(agentContext, record) {
    const records = this.#records(agentContext)
    if (records.has(record.id)) {
      throw new RecordDuplicateError(`Record with id ${record.id} already exists`, { recordType: record.type })
    }
    record.updatedAt = new Date()
    records.set(record.id, this.#entry(record))
  }

  async update(agentContext, record) {
    const records = this.#records(agentContext)
    const old = records.get(record.id)
    if (!old || old.type !== record.type) {
      throw new RecordNotFoundError(`record with id ${record.id} not found.`, { recordType: record.type })
    }
    record.updatedAt = new Date()
    records.set(record.id, this.#entry(record))
  }

  async delete(agentContext, record) {
    await this.deleteById(agentContext, record.constructor, record.id)
  }

  async deleteById(agentContext, recordClass, id) {
    const records = this.#records(agentContext)
    if (records.get(id)?.type !== recordClass.type) {
      throw new RecordNotFoundError(`record with id ${id} not found.`, { recordType: recordClass.type })
    }
    records.delete(id)
  }

  async getById(agentContext, recordClass, id) {
    const entry = this.#records(agentContext).get(id)
    if (!entry || entry.type !== recordClass.type) {
      throw new RecordNotFoundError(`record with id ${id} not found.`, { recordType: recordClass.type })
    }
    return this.#instance(id, entry, recordClass)
  }

  async getAll(agentContext, recordClass) {
    return this.findByQuery(agentContext, recordClass, {})
  }

  async findByQuery(agentContext, recordClass, query, queryOptions = {}) {
    const found = []
    for (const [id, entry] of this.#records(agentContext)) {
      if (entry.type === recordClass.type && matches(entry.tags, query)) found.push(this.#instance(id, entry, recordClass))
    }
    const offset = queryOptions.offset ?? 0
    return found.slice(offset, queryOptions.limit === undefined ? undefined : offset + queryOptions.limit)
  }
}

function matches(tags, query) {
  for (const [key, want] of Object.entries(query ?? {})) {
    if (key === '$and') {
      if (!want.every((q) => matches(tags, q))) return false
    } else if (key === '$or') {
      if (want.length > 0 && !want.some((q) => matches(tags, q))) return false
    } else if (key === '$not') {
      if (matches(tags, want)) return false
    } else if (key.startsWith('$')) {
      throw new CredoError(`Unsupported query operator ${key}`)
    } else if (want === undefined) {
      // no constraint
    } else if (want === null) {
      if (tags[key] !== undefined && tags[key] !== null) return false
    } else if (Array.isArray(want)) {
      const have = tags[key]
      if (!Array.isArray(have) || !want.every((v) => have.includes(v))) return false
    } else if (tags[key] !== want) {
      return false
    }
  }
  return true
}
