// First run: add a provider and a model, create a bot — or import the bundled examples to explore first.

import { post } from "./api.js";
import { field, h, replace, select, toast } from "./dom.js";
import { modelPicker } from "./provider_check.js";
import { providerFields } from "./providers.js";

function stepList(current) {
  const steps = ["Add a provider", "Add a model", "Create a bot"];
  return h(
    "ol.steps",
    { "aria-label": "Setup steps" },
    steps.map((label, index) =>
      h(
        `li.${index < current ? "done" : index === current ? "current" : "todo"}`,
        { "aria-current": index === current ? "step" : null },
        h("span.step-num", { "aria-hidden": "true" }, index < current ? "✓" : String(index + 1)),
        h("span", label),
        index < current ? h("span.visually-hidden", " (done)") : null,
      ),
    ),
  );
}

/** The setup step the catalog is at: 0 provider, 1 model, 2 bot, 3 done. */
function stepOf(store) {
  const chatModels = store.models.filter((m) => m.type === "chat");
  return !store.providers.length ? 0 : !chatModels.length ? 1 : !store.bots.length ? 2 : 3;
}

const STEP_DONE_WORDS = [
  "A provider was added meanwhile (in another tab or page): the setup moved on to the next step. Nothing was added twice.",
  "A chat model was added meanwhile: the setup moved on. Nothing was added twice.",
  "A bot was made meanwhile: the setup moved on. Nothing was added twice.",
];

export async function onboardingView(main, _params, { store, go, auto }) {
  const hash = location.hash;
  await store.refresh();
  // The user may have gone elsewhere while the catalog loaded: never draw over the view they went to.
  if (location.hash !== hash) return null;
  const page = h("section.page.onboarding");
  replace(main, page);
  /** Whether this page is still the one shown (the user did not navigate away while a request ran). */
  const shown = () => page.isConnected;

  /** Before a step's form creates anything: the catalog as it is now. If the step was done meanwhile (in another
   * tab, or on another page of this one), re-draw at the right step instead of adding a second one. */
  async function stillAt(step) {
    await store.refresh();
    if (stepOf(store) === step) return true;
    if (shown()) {
      render();
      toast(STEP_DONE_WORDS[step]);
    }
    return false;
  }

  const importButton = h(
    "button.primary#import-examples",
    {
      type: "button",
      onclick: async () => {
        importButton.disabled = true;
        importButton.textContent = "Importing…";
        try {
          const result = await post("/examples/import", {});
          for (const item of result.imported) {
            if (item.draft) localStorage.setItem(`contextshift.draft.${item.chat.id}`, item.draft);
          }
          await store.refresh();
          const first = result.imported[0]?.chat || store.chats.find((c) => store.bot(c.bot_id)?.name.startsWith("Example:"));
          toast(result.imported.length ? `Imported ${result.imported.length} example chats.` : "The examples are already here.");
          if (!shown()) return; // the user went elsewhere meanwhile: stay there
          if (first) go(`#/chat/${first.id}`);
          else render();
        } catch (error) {
          toast(error.missing ? "This server cannot import examples." : error.message, "error");
          importButton.disabled = false;
          importButton.textContent = "Import the examples";
        }
      },
    },
    "Import the examples",
  );
  const examplesCard = h(
    "div.card.examples-card",
    h("h2", "Just exploring?"),
    h(
      "p",
      "Import three example conversations — a fantasy roleplay with a lorebook, a support chat with Anthropic tool use, and a travel agent with parallel tool calls — each with a small context budget.",
    ),
    h("p", "Their context meter and prompt preview work right away, without any provider: see which messages would be dropped, summarized or kept, and why."),
    importButton,
  );

  function render() {
    const chatModels = store.models.filter((m) => m.type === "chat");
    const step = stepOf(store);
    let form;
    if (step === 0) {
      const f = providerFields(null);
      form = h(
        "form.setup-form",
        {
          "aria-label": "Add a provider",
          onsubmit: async (event) => {
            event.preventDefault();
            try {
              if (!(await stillAt(0))) return;
              await post("/providers", f.values());
              await store.refresh();
              if (shown()) render();
            } catch (error) {
              toast(error.message, "error");
            }
          },
        },
        h("h2", "1. Where do replies come from?"),
        h("p.help", "Any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, OpenRouter), Anthropic, or OpenAI Codex."),
        f.elements,
        h("div.actions", h("button.primary", { type: "submit" }, "Add provider")),
      );
    } else if (step === 1) {
      const provider = select(store.providers.map((p) => [p.id, p.name]), store.providers[store.providers.length - 1].id, { name: "provider_id" });
      const name = h("input", { type: "text", name: "model_name", required: true, placeholder: "gpt-4o" });
      const windowInput = h("input", { type: "number", name: "context_window", min: 1, step: 1, placeholder: "e.g. 128000" });
      const maxOut = h("input", { type: "number", name: "max_output_tokens", min: 1, step: 1, placeholder: "optional" });
      const picker = modelPicker(() => provider.value, { name, windowInput, maxOut });
      form = h(
        "form.setup-form",
        {
          "aria-label": "Add a model",
          onsubmit: async (event) => {
            event.preventDefault();
            const body = { provider_id: provider.value, name: name.value.trim(), type: "chat" };
            if (windowInput.value) body.context_window = Number(windowInput.value);
            if (maxOut.value) body.max_output_tokens = Number(maxOut.value);
            try {
              if (!(await stillAt(1))) return;
              await post("/models", body);
              await store.refresh();
              if (shown()) render();
            } catch (error) {
              toast(error.message, "error");
            }
          },
        },
        h("h2", "2. Which model?"),
        store.providers.length > 1 ? field("Provider", provider).row : null,
        picker.row,
        field("Model name", name, "As the provider calls it, e.g. gpt-4o, claude-sonnet-4-5, llama3.1:8b.").row,
        field("Context window (tokens)", windowInput, "The model's window: the budget of every prompt, and what automatic compaction works against.").row,
        field("Max output tokens", maxOut).row,
        h("div.actions", h("button.primary", { type: "submit" }, "Add model")),
      );
      queueMicrotask(() => name.focus());
    } else if (step === 2) {
      const name = h("input", { type: "text", name: "bot_name", required: true, value: "Assistant" });
      const model = select(chatModels.map((m) => [m.id, m.name]), chatModels[chatModels.length - 1].id, { name: "chat_model_id" });
      const prompt = h("textarea", { name: "system_prompt", rows: 3, value: "You are a helpful assistant." });
      form = h(
        "form.setup-form",
        {
          "aria-label": "Create a bot",
          onsubmit: async (event) => {
            event.preventDefault();
            try {
              if (!(await stillAt(2))) return;
              const { bot } = await post("/bots", { name: name.value.trim(), chat_model_id: model.value, system_prompt: prompt.value });
              const { chat } = await post("/chats", { bot_id: bot.id, type: "chat" });
              await store.refresh();
              if (shown()) go(`#/chat/${chat.id}`);
            } catch (error) {
              toast(error.message, "error");
            }
          },
        },
        h("h2", "3. Create a bot"),
        h("p.help", "A bot holds the prompt settings; compaction is on by default and needs no settings."),
        field("Bot name", name).row,
        field("Chat model", model).row,
        field("System prompt", prompt).row,
        h("div.actions", h("button.primary", { type: "submit" }, "Create bot and start chatting")),
      );
      queueMicrotask(() => name.focus());
    } else {
      form = h(
        "div.setup-form",
        h("h2", "You are set up."),
        h("p", "Open a chat from the list, or start a new one."),
        h("div.actions", h("a.button.primary", { href: "#/" }, "Go to chats"), h("a.button", { href: "#/providers" }, "Providers & models")),
      );
    }
    replace(
      page,
      h("h1", auto ? "Welcome to contextshift" : "Getting started"),
      h(
        "p.lead",
        "contextshift keeps long conversations inside a model's context window without losing what matters — and shows you exactly what the model saw, what was left out, and why.",
      ),
      h("div.onboarding-grid", h("div.card.setup-card", stepList(step), form), examplesCard),
    );
  }
  render();
  return null;
}
