// Providers and models: add, edit, disable. API keys are write-only: a password field never filled back.

import { del, patch, post } from "./api.js";
import { badge, checkbox, field, h, num, replace, select, toast } from "./dom.js";
import { connectionTest, modelPicker } from "./provider_check.js";

export const KINDS = [
  ["openai", "OpenAI-compatible (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, OpenRouter)"],
  ["anthropic", "Anthropic Messages"],
  ["openai-codex", "OpenAI Codex (no output limit)"],
];
export const DEFAULT_URLS = {
  openai: "https://api.openai.com/v1",
  anthropic: "https://api.anthropic.com",
  "openai-codex": "https://api.openai.com/v1",
};

/** Provider fields; provider null for a new one. Returns {elements, values()}. */
export function providerFields(provider) {
  const name = h("input", { type: "text", name: "name", required: true, maxlength: 200, value: provider?.name || "" });
  const kind = select(KINDS, provider?.kind || "openai", { name: "kind", disabled: Boolean(provider) });
  const baseUrl = h("input", { type: "url", name: "base_url", required: true, value: provider?.base_url || DEFAULT_URLS.openai, pattern: "https?://.+" });
  const key = h("input", {
    type: "password",
    name: "api_key",
    autocomplete: "new-password",
    spellcheck: "false",
    placeholder: provider?.has_api_key ? "key set — type a new one to replace it" : "sk-…",
  });
  const removeKey = provider?.has_api_key ? checkbox("Remove the stored key") : null;
  const enabled = checkbox("Enabled", { checked: provider ? provider.enabled : true });
  if (!provider) {
    kind.addEventListener("change", () => {
      if (Object.values(DEFAULT_URLS).includes(baseUrl.value) || !baseUrl.value) baseUrl.value = DEFAULT_URLS[kind.value];
    });
  }
  const keyHelp = h(
    "span",
    provider?.has_api_key ? [badge("key set", "ok"), " The key is never shown again. Leave empty to keep it."] : "Stored on the server and never shown again. Local servers may need none.",
  );
  // Tests what the form says now, before it is saved: the saved key is used only while kind and URL are unchanged.
  const test = connectionTest(
    () => {
      const body = { kind: provider ? provider.kind : kind.value, base_url: baseUrl.value.trim() };
      if (provider) body.provider_id = provider.id;
      if (removeKey?.input.checked) body.api_key = "";
      else if (key.value) body.api_key = key.value;
      return ["/provider-tests", body];
    },
    { valid: () => baseUrl.reportValidity() },
  );
  const elements = [
    field("Name", name).row,
    field("Kind", kind, provider ? "The kind cannot be changed." : null).row,
    field("Base URL", baseUrl).row,
    field("API key", key, keyHelp).row,
    removeKey?.row,
    enabled.row,
    test.row,
  ];
  const values = () => {
    const out = { name: name.value.trim(), base_url: baseUrl.value.trim(), enabled: enabled.input.checked };
    if (!provider) out.kind = kind.value;
    if (removeKey?.input.checked) out.api_key = "";
    else if (key.value) out.api_key = key.value;
    return out;
  };
  return { elements, values, focus: () => name.focus() };
}

/** Model fields; model null for a new one. */
export function modelFields(model, { providers = [], providerId } = {}) {
  const name = h("input", { type: "text", name: "model_name", required: true, maxlength: 200, value: model?.name || "", placeholder: "gpt-4o" });
  const type = select(["chat", "embedding", "image"], model?.type || "chat", { name: "type" });
  const windowInput = h("input", { type: "number", name: "context_window", min: 1, max: 10000000, step: 1, value: model?.context_window ?? "", placeholder: "e.g. 128000" });
  const maxOut = h("input", { type: "number", name: "max_output_tokens", min: 1, max: 10000000, step: 1, value: model?.max_output_tokens ?? "" });
  const tokenizer = h("input", { type: "text", name: "tokenizer", maxlength: 500, value: model?.tokenizer || "", placeholder: "from the model name" });
  const enabled = checkbox("Enabled", { checked: model ? model.enabled : true });
  const provider = providers.length > 1 && !model ? select(providers.map((p) => [p.id, p.name]), providerId, { name: "provider_id" }) : null;
  const listedFrom = model ? model.provider_id : provider ? null : providerId;
  const picker = listedFrom ? modelPicker(listedFrom, { name, windowInput, maxOut }) : null;
  const elements = [
    provider ? field("Provider", provider).row : null,
    picker?.row,
    field("Model name", name, "As the provider calls it.").row,
    field("Type", type).row,
    field("Context window (tokens)", windowInput, "Needed for automatic compaction and the status panel.").row,
    field("Max output tokens", maxOut).row,
    field("Tokenizer", tokenizer, "Optional: o200k_base, cl100k_base, a tokenizer.json path, or approximate.").row,
    enabled.row,
  ];
  const values = () => {
    const out = {
      name: name.value.trim(),
      type: type.value,
      context_window: windowInput.value ? Number(windowInput.value) : null,
      max_output_tokens: maxOut.value ? Number(maxOut.value) : null,
      tokenizer: tokenizer.value.trim() || null,
      enabled: enabled.input.checked,
    };
    if (!model) {
      out.provider_id = provider ? provider.value : providerId;
      for (const k of ["context_window", "max_output_tokens", "tokenizer"]) if (out[k] === null) delete out[k];
    }
    return out;
  };
  return { elements, values, focus: () => name.focus() };
}

export async function providersView(main, _params, { store }) {
  await store.refresh();
  const state = { editing: null, addingModelTo: null, adding: store.providers.length === 0 };
  const page = h("section.page.providers-page");
  replace(main, page);

  const rerender = async (refresh = true) => {
    if (refresh) await store.refresh();
    render();
  };

  async function run(action, done) {
    try {
      await action();
      toast(done);
      await rerender();
    } catch (error) {
      toast(error.message, "error");
    }
  }

  function modelRow(model) {
    if (state.editing === `model:${model.id}`) {
      const f = modelFields(model);
      queueMicrotask(f.focus);
      return h(
        "li.model-row.editing",
        h(
          "form.inline-form",
          {
            "aria-label": `Edit model ${model.name}`,
            onsubmit: (event) => {
              event.preventDefault();
              state.editing = null;
              run(() => patch(`/models/${model.id}`, f.values()), "Model saved.");
            },
          },
          f.elements,
          h("div.actions", h("button.primary.small", { type: "submit" }, "Save model"), h("button.small", { type: "button", onclick: () => ((state.editing = null), render()) }, "Cancel")),
        ),
      );
    }
    return h(
      "li.model-row",
      { dataset: { modelId: model.id } },
      h(
        "div.model-main",
        h("strong", model.name),
        " ",
        badge(model.type),
        model.enabled ? null : [" ", badge("disabled", "bad")],
        h(
          "p.muted.small",
          `window ${model.context_window ? num(model.context_window) : "unknown"} · max output ${model.max_output_tokens ? num(model.max_output_tokens) : "—"} · tokenizer `,
          h("code", model.tokenizer_profile),
          model.tokenizer_approximate ? " (approximate)" : "",
        ),
      ),
      h(
        "div.actions",
        h("button.small", { type: "button", "aria-label": `Edit model ${model.name}`, onclick: () => ((state.editing = `model:${model.id}`), render()) }, "Edit"),
        h(
          "button.small",
          { type: "button", "aria-label": `${model.enabled ? "Disable" : "Enable"} model ${model.name}`, onclick: () => run(() => patch(`/models/${model.id}`, { enabled: !model.enabled }), model.enabled ? "Model disabled." : "Model enabled.") },
          model.enabled ? "Disable" : "Enable",
        ),
        h(
          "button.small.danger-outline",
          {
            type: "button",
            "aria-label": `Delete model ${model.name}`,
            onclick: () => window.confirm(`Delete the model ${model.name}?`) && run(() => del(`/models/${model.id}`), "Model deleted."),
          },
          "Delete",
        ),
      ),
    );
  }

  function providerCard(provider) {
    const models = store.models.filter((m) => m.provider_id === provider.id);
    const editing = state.editing === `provider:${provider.id}`;
    let body;
    if (editing) {
      const f = providerFields(provider);
      queueMicrotask(f.focus);
      body = h(
        "form.inline-form",
        {
          "aria-label": `Edit provider ${provider.name}`,
          onsubmit: (event) => {
            event.preventDefault();
            state.editing = null;
            run(() => patch(`/providers/${provider.id}`, f.values()), "Provider saved.");
          },
        },
        f.elements,
        h("div.actions", h("button.primary.small", { type: "submit" }, "Save provider"), h("button.small", { type: "button", onclick: () => ((state.editing = null), render()) }, "Cancel")),
      );
    } else {
      const test = connectionTest(() => [`/providers/${provider.id}/test`, {}]);
      test.button.setAttribute("aria-label", `Test connection of ${provider.name}`);
      body = h(
        "div.provider-main",
        h("p.muted.small", h("code", provider.kind), " · ", provider.base_url),
        h(
          "p.small",
          provider.has_api_key ? badge("key set", "ok") : badge("no key", "muted"),
          " ",
          provider.enabled ? badge("enabled", "ok") : badge("disabled", "bad"),
          " ",
          provider.enforces_output_limit ? null : badge("no output limit", "warn", { title: "Its models cannot be used for compaction" }),
        ),
        test.result,
        h(
          "div.actions",
          h("button.small", { type: "button", "aria-label": `Edit provider ${provider.name}`, onclick: () => ((state.editing = `provider:${provider.id}`), render()) }, "Edit"),
          test.button,
          h(
            "button.small",
            { type: "button", "aria-label": `${provider.enabled ? "Disable" : "Enable"} provider ${provider.name}`, onclick: () => run(() => patch(`/providers/${provider.id}`, { enabled: !provider.enabled }), provider.enabled ? "Provider disabled." : "Provider enabled.") },
            provider.enabled ? "Disable" : "Enable",
          ),
          h(
            "button.small.danger-outline",
            {
              type: "button",
              "aria-label": `Delete provider ${provider.name}`,
              onclick: () => window.confirm(`Delete the provider ${provider.name} and its models?`) && run(() => del(`/providers/${provider.id}`), "Provider deleted."),
            },
            "Delete",
          ),
        ),
      );
    }
    let addModel = null;
    if (state.addingModelTo === provider.id) {
      const f = modelFields(null, { providerId: provider.id });
      queueMicrotask(f.focus);
      addModel = h(
        "form.inline-form.add-model",
        {
          "aria-label": `Add a model to ${provider.name}`,
          onsubmit: (event) => {
            event.preventDefault();
            state.addingModelTo = null;
            run(() => post("/models", f.values()), "Model added.");
          },
        },
        h("h4", "Add a model"),
        f.elements,
        h("div.actions", h("button.primary.small", { type: "submit" }, "Add model"), h("button.small", { type: "button", onclick: () => ((state.addingModelTo = null), render()) }, "Cancel")),
      );
    }
    return h(
      "li.card.provider-card",
      { dataset: { providerId: provider.id } },
      h("h2.card-title", provider.name),
      body,
      h("h3.small-head", `Models (${models.length})`),
      models.length ? h("ul.model-list", models.map(modelRow)) : h("p.muted", "No models yet."),
      addModel || h("button.small", { type: "button", onclick: () => ((state.addingModelTo = provider.id), render()) }, "+ Add model"),
    );
  }

  function addProviderForm() {
    const f = providerFields(null);
    queueMicrotask(f.focus);
    return h(
      "form.card.inline-form.add-provider",
      {
        "aria-label": "Add a provider",
        onsubmit: (event) => {
          event.preventDefault();
          state.adding = false;
          run(async () => {
            const { provider } = await post("/providers", f.values());
            state.addingModelTo = provider.id;
          }, "Provider added. Now add a model.");
        },
      },
      h("h2", "Add a provider"),
      f.elements,
      h("div.actions", h("button.primary", { type: "submit" }, "Add provider"), store.providers.length ? h("button", { type: "button", onclick: () => ((state.adding = false), render()) }, "Cancel") : null),
    );
  }

  function render() {
    replace(
      page,
      h("div.page-head", h("h1", "Providers & models"), state.adding ? null : h("button.primary", { type: "button", onclick: () => ((state.adding = true), render()) }, "+ Add provider")),
      h("p.lead", "Where replies come from. API keys are write-only: the service stores and uses them but never sends them back."),
      state.adding ? addProviderForm() : null,
      store.providers.length ? h("ul.card-list.providers", store.providers.map(providerCard)) : state.adding ? null : h("p", "No providers yet."),
    );
  }
  render();
}
