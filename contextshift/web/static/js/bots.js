// Bots: the list, the settings form (chat model, strategy, reserve, lorebooks, compaction C4) and the
// Compaction tab (the log, C12).

import { ApiError, del, get, optional, patch, post, strategyNames } from "./api.js";
import { badge, checkbox, duration, field, h, num, replace, select, shorten, tabs, toast, when } from "./dom.js";
import { chatTitle, modelLabel } from "./store.js";
import { errorWords, STATUS, statusTone, TRIGGER_WORDS } from "./words.js";
import { memoriesEditor } from "./memories.js";

const COMPACTION_FIELDS = ["compaction_enabled", "compaction_threshold", "compaction_ratio", "compaction_model_id"];

/** "1 chat", "2 chats", "0 chats". */
export function plural(count, noun) {
  return `${num(count)} ${noun}${count === 1 ? "" : "s"}`;
}

export async function botsView(main, _params, { store }) {
  await store.refresh();
  replace(
    main,
    h(
      "section.page",
      h("div.page-head", h("h1", "Bots"), h("div.actions", h("a.button", { href: "#/lorebooks" }, "Lorebooks"), h("a.button.primary", { href: "#/bot/new" }, "+ New bot"))),
      store.bots.length
        ? h(
            "ul.card-list",
            store.bots.map((bot) =>
              h(
                "li.card",
                h("a.card-title", { href: `#/bot/${bot.id}` }, bot.name),
                h(
                  "p.muted",
                  bot.chat_model_id ? modelLabel(store.model(bot.chat_model_id)) : "no chat model",
                  " · strategy ",
                  h("code", bot.context_strategy),
                  " · reserve ",
                  bot.response_reserve ? num(bot.response_reserve) : "auto",
                ),
                h("p.muted", plural(store.chats.filter((c) => c.bot_id === bot.id).length, "chat")),
              ),
            ),
          )
        : h("p", "No bots yet. ", h("a", { href: "#/welcome" }, "Get started"), "."),
    ),
  );
}

function chatModelOptions(store, current) {
  const options = [["", "None — preview only"]];
  for (const model of store.models.filter((m) => m.type === "chat" || m.id === current)) {
    const provider = store.provider(model.provider_id);
    const off = !model.enabled || (provider && !provider.enabled);
    options.push([
      model.id,
      `${model.name}${provider ? ` · ${provider.name}` : ""}${model.context_window ? ` (${num(model.context_window)} window)` : ""}${off ? " — disabled" : ""}`,
    ]);
  }
  return options;
}

/** The settings form; bot null for a new bot. Resolves to the saved bot. */
async function settingsForm(container, bot, { store, go }) {
  const names = await strategyNames();
  let lorebooks = [];
  try {
    lorebooks = (await get("/lorebooks")).lorebooks;
  } catch {
    lorebooks = [];
  }
  const supportsCompaction = bot ? COMPACTION_FIELDS.slice(0, 2).every((k) => k in bot) : true;
  let eligible = null;
  if (bot && supportsCompaction) {
    try {
      const data = await optional(`/bots/${bot.id}/compaction/models`);
      eligible = data ? data.models : null;
    } catch {
      eligible = null;
    }
  }

  const name = h("input", { type: "text", name: "name", required: true, maxlength: 200, value: bot?.name || "" });
  const chatModel = select(chatModelOptions(store, bot?.chat_model_id), bot?.chat_model_id || (bot ? "" : store.models.find((m) => m.type === "chat")?.id || ""), { name: "chat_model_id" });
  const systemPrompt = h("textarea", { name: "system_prompt", rows: 4, value: bot?.system_prompt || "" });
  const persona = h("textarea", { name: "persona", rows: 2, value: bot?.persona || "" });
  const strategy = select(
    names.map((n) => [n, n]),
    bot?.context_strategy || "truncate",
    { name: "context_strategy" },
  );
  const reserve = h("input", { type: "number", name: "response_reserve", min: 0, max: 1000000, step: 1, required: true, value: bot?.response_reserve ?? 0, title: "0: the smaller of 1,024, the model's output limit and a quarter of the window" });
  const limit = h("input", { type: "number", name: "context_limit", min: 1, max: 10000000, step: 1, placeholder: "the model's window", value: bot?.context_limit ?? "" });
  const authorNote = h("textarea", { name: "author_note", rows: 2, value: bot?.author_note || "" });
  const authorDepth = h("input", { type: "number", name: "author_note_depth", min: 0, max: 1000, value: bot?.author_note_depth ?? 4 });

  const selectedBooks = new Set(bot?.lorebook_ids || []);
  const bookList = h("div.check-list", { role: "group", "aria-label": "Lorebooks" });
  const renderBooks = () =>
    replace(
      bookList,
      lorebooks.length
        ? lorebooks.map((book) => {
            const c = checkbox(`${book.name} (${book.entries.length} entr${book.entries.length === 1 ? "y" : "ies"})`, {
              checked: selectedBooks.has(book.id),
              onchange: (event) => (event.target.checked ? selectedBooks.add(book.id) : selectedBooks.delete(book.id)),
            });
            c.row.append(h("a.small.edit-lorebook", { href: `#/lorebook/${book.id}`, "aria-label": `Edit the lorebook ${book.name}` }, "Edit"));
            return c.row;
          })
        : h("p.muted", "No lorebooks yet."),
    );
  renderBooks();
  const bookName = h("input", { type: "text", maxlength: 200 });
  const bookKeys = h("input", { type: "text", placeholder: "dragon, Vermax" });
  const bookContent = h("textarea", { rows: 2 });
  const bookConstant = checkbox("Always include (constant)");
  const newBook = h(
    "details.new-lorebook",
    h("summary", "Add a lorebook"),
    field("Lorebook name", bookName).row,
    field("Keys (comma-separated)", bookKeys, "The entry is added when a key appears in the input or recent messages.").row,
    field("Entry text", bookContent).row,
    bookConstant.row,
    h(
      "button.small",
      {
        type: "button",
        onclick: async () => {
          if (!bookName.value.trim() || !bookContent.value.trim()) return toast("A lorebook needs a name and an entry text.", "error");
          try {
            const { lorebook } = await post("/lorebooks", {
              name: bookName.value.trim(),
              entries: [
                {
                  keys: bookKeys.value.split(",").map((k) => k.trim()).filter(Boolean),
                  content: bookContent.value,
                  constant: bookConstant.input.checked,
                },
              ],
            });
            lorebooks.push(lorebook);
            selectedBooks.add(lorebook.id);
            bookName.value = bookKeys.value = bookContent.value = "";
            renderBooks();
            toast(`Lorebook “${lorebook.name}” created; save the bot to use it.`);
          } catch (error) {
            toast(error.message, "error");
          }
        },
      },
      "Create lorebook",
    ),
  );

  // Compaction (C4): enabled, threshold (0 = automatic), ratio only when threshold > 0, the model picker.
  const enabled = checkbox("Compaction enabled", { name: "compaction_enabled", checked: bot ? bot.compaction_enabled !== false : true });
  const threshold = h("input", { type: "number", name: "compaction_threshold", min: 0, step: 1, value: bot?.compaction_threshold ?? 0 });
  const ratio = h("input", { type: "number", name: "compaction_ratio", min: 0.05, max: 0.95, step: 0.05, value: bot?.compaction_ratio ?? 0.5 });
  const ratioField = field("Ratio (legacy)", ratio, "Share of the compactable history folded into the summary each time.");
  const compactionModelOptions = [["", "Use chat model (default)"]];
  for (const model of eligible || []) compactionModelOptions.push([model.id, `${modelLabel(store.model(model.id) || model)}${model.context_window ? ` (${num(model.context_window)} window)` : ""}`]);
  if (bot?.compaction_model_id && !(eligible || []).some((m) => m.id === bot.compaction_model_id)) {
    const current = store.model(bot.compaction_model_id);
    compactionModelOptions.push([bot.compaction_model_id, `${current ? current.name : bot.compaction_model_id} — not eligible`]);
  }
  const compactionModel = select(compactionModelOptions, bot?.compaction_model_id || "", { name: "compaction_model_id" });
  const syncRatio = () => {
    const show = Number(threshold.value) > 0;
    ratioField.row.hidden = !show;
  };
  threshold.addEventListener("input", syncRatio);
  syncRatio();
  const thresholdField = field("Threshold (tokens, 0 = automatic)", threshold, " ");
  const modeHint = thresholdField.row.querySelector(".help");
  const syncHint = () => {
    modeHint.textContent =
      Number(threshold.value) > 0
        ? `Legacy mode: compacts when raw history reaches ${num(Number(threshold.value))} tokens.`
        : "Automatic: relative to the chat model's window — a background pass at 50%, a pass before the turn at 75%, aiming at about 40%.";
  };
  threshold.addEventListener("input", syncHint);
  syncHint();
  const compaction = h(
    "fieldset.compaction-settings",
    { disabled: !supportsCompaction },
    h("legend", "Compaction"),
    supportsCompaction ? null : h("p.notice", "This server does not support compaction settings yet."),
    h("p.help", "Compaction folds old turns of a chat into a stored summary so the active context stays small. Raw messages are kept, greyed out."),
    enabled.row,
    thresholdField.row,
    ratioField.row,
    bot
      ? field(
          "Compaction model",
          compactionModel,
          eligible === null
            ? "The list of eligible models is not available on this server."
            : "Only enabled chat models whose provider enforces output limits and whose window is known.",
        ).row
      : h("p.help", "You can pick a separate compaction model after creating the bot; by default the chat model summarizes."),
  );

  const saveButton = h("button.primary", { type: "submit" }, bot ? "Save settings" : "Create bot");
  const form = h(
    "form.settings-form",
    {
      "aria-label": "Bot settings",
      onsubmit: async (event) => {
        event.preventDefault();
        const values = {
          name: name.value.trim(),
          chat_model_id: chatModel.value || null,
          system_prompt: systemPrompt.value,
          persona: persona.value,
          context_strategy: strategy.value,
          response_reserve: Number(reserve.value),
          context_limit: limit.value ? Number(limit.value) : null,
          lorebook_ids: [...selectedBooks],
          author_note: authorNote.value ? authorNote.value : null,
          author_note_depth: Number(authorDepth.value || 0),
        };
        if (supportsCompaction) {
          values.compaction_enabled = enabled.input.checked;
          values.compaction_threshold = Number(threshold.value || 0);
          if (Number(threshold.value) > 0) values.compaction_ratio = Number(ratio.value);
          if (bot) values.compaction_model_id = compactionModel.value || null;
        }
        let body = values;
        if (bot) {
          body = {};
          for (const [key, value] of Object.entries(values)) {
            const before = bot[key];
            const same = Array.isArray(value) ? JSON.stringify(value) === JSON.stringify(before || []) : (before ?? null) === value;
            if (!same) body[key] = value;
          }
          if (!Object.keys(body).length) return toast("Nothing changed.");
        } else {
          for (const key of Object.keys(body)) if (body[key] === null) delete body[key];
        }
        saveButton.disabled = true;
        try {
          const saved = bot ? (await patch(`/bots/${bot.id}`, body)).bot : (await post("/bots", body)).bot;
          await store.refresh();
          toast(bot ? "Settings saved." : `Bot “${saved.name}” created.`);
          if (!bot) go(`#/bot/${saved.id}`);
          else {
            Object.assign(bot, saved);
            await settingsForm(container, bot, { store, go });
          }
        } catch (error) {
          toast(error instanceof ApiError ? `${error.message}` : String(error), "error");
        } finally {
          saveButton.disabled = false;
        }
      },
    },
    h(
      "div.settings-column",
      h(
      "fieldset",
      h("legend", "Bot"),
      field("Name", name).row,
      field("Chat model", chatModel, store.models.some((m) => m.type === "chat") ? null : h("span", "No chat models yet — ", h("a", { href: "#/providers" }, "add one"), ".")).row,
      field("System prompt", systemPrompt).row,
      field("Persona", persona).row,
    ),
    h(
      "fieldset",
      h("legend", "Context"),
      field("Context strategy", strategy, "How the prompt is made to fit: truncate drops the oldest turns, summarize folds them into a local summary, vector-recall drops low-relevance lore first, recall brings back older turns the new message asks about, manual honours your exclusions first.").row,
      field("Reply reserve (tokens)", reserve, "Kept free for the model's reply.").row,
      field("Context limit (tokens)", limit, "Leave empty to use the chat model's window.").row,
      h("div.field", h("span.label", "Lorebooks"), bookList, newBook, h("a.small", { href: "#/lorebooks" }, "All lorebooks: edit entries, rename, delete")),
      field("Author's note", authorNote, "Inserted a few messages from the end of the history.").row,
      field("Author's note depth", authorDepth).row,
    ),
    ),
    h("div.settings-column", compaction),
    h("div.actions.form-actions", saveButton),
  );
  replace(container, form);
  return form;
}

export async function newBotView(main, _params, ctx) {
  const container = h("div");
  replace(main, h("section.page", h("h1", "New bot"), container));
  await settingsForm(container, null, ctx);
}

function summaryDetails(log) {
  if (!log.summary) return h("span.muted", log.status === STATUS.SKIPPED ? "nothing to compact" : "—");
  return h(
    "details.summary-text",
    h("summary", h("span.when-closed", shorten(log.summary, 120)), h("span.when-open", "Summary")),
    h("p.pre", log.summary),
  );
}

function logRow(log, store) {
  const chat = store.chat(log.chat_id);
  const kind = statusTone(log.status);
  const usage = log.input_tokens != null || log.output_tokens != null ? `${num(log.input_tokens)} in / ${num(log.output_tokens)} out` : "—";
  return h(
    "tr.log-row",
    { dataset: { logId: log.id, status: log.status } },
    h("td", { "data-label": "Status" }, badge(log.status, kind)),
    h("td", { "data-label": "Trigger" }, TRIGGER_WORDS[log.trigger] || log.trigger),
    h("td", { "data-label": "Started" }, h("time", { datetime: log.started_at }, when(log.started_at))),
    h("td", { "data-label": "Duration" }, duration(log.started_at, log.completed_at)),
    h("td.num", { "data-label": "Messages" }, num(log.message_count), log.passes > 1 ? h("span.muted", ` (${log.passes} passes)`) : null),
    h("td", { "data-label": "Model" }, log.model ? h("code", log.model) : "—"),
    h("td.num", { "data-label": "Usage" }, usage),
    h("td", { "data-label": "Chat" }, h("a", { href: `#/chat/${log.chat_id}` }, chat ? chatTitle(chat) : log.chat_id.slice(0, 8))),
  );
}

function logDetail(log) {
  return h(
    "tr.log-detail",
    { dataset: { logId: log.id } },
    h(
      "td.log-summary",
      { colspan: 8, "data-label": log.error_code ? "Error" : "Summary" },
      log.error_code ? h("p.error-text", h("code", log.error_code), " ", errorWords(log.error_code, "")) : null,
      summaryDetails(log),
    ),
  );
}

async function compactionLog(container, bot, store) {
  const body = h("tbody");
  const table = h(
    "table.log-table",
    h("caption.visually-hidden", "Compaction log, newest first"),
    h(
      "thead",
      h(
        "tr",
        ["Status", "Trigger", "Started", "Duration", "Messages", "Model", "Usage", "Chat"].map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    body,
  );
  const more = h("button.small", { type: "button", hidden: true }, "Load more");
  const empty = h("p.muted", { hidden: true }, "No compaction has run for this bot yet. It runs by itself when a chat's history grows, or with “Compact now” in a chat's status panel.");
  let offset = 0;
  const load = async () => {
    let data;
    try {
      data = await optional(`/bots/${bot.id}/compaction/logs?limit=50&offset=${offset}`);
    } catch (error) {
      replace(container, h("p.error-text", { role: "alert" }, error.message));
      return;
    }
    if (data === null) {
      replace(container, h("p.notice", "This server has no compaction log yet (no /compaction/logs endpoint)."));
      return;
    }
    for (const log of data.logs) body.append(logRow(log, store), logDetail(log));
    offset += data.logs.length;
    more.hidden = !data.has_more;
    empty.hidden = offset > 0;
    table.hidden = offset === 0;
  };
  more.addEventListener("click", load);
  replace(
    container,
    h("p.help", "Every compaction run of this bot's chats, newest first: status, trigger, when it started and how long it took, how many messages it folded, the model and its usage, and the summary or the error."),
    h("div.table-wrap", table),
    empty,
    more,
  );
  await load();
}

export async function botView(main, [botId, tab], ctx) {
  const { store, go } = ctx;
  const { bot } = await get(`/bots/${encodeURIComponent(botId)}`);
  const chats = store.chats.filter((c) => c.bot_id === bot.id);
  const settings = h("div");
  const log = h("div");
  const memories = h("div");
  let memoriesShown = false;
  const tabset = tabs(
    [
      { id: "settings", label: "Settings", render: () => settings.childElementCount || settingsForm(settings, bot, ctx) },
      { id: "memories", label: "Memories", render: () => (memoriesShown ||= Boolean(memoriesEditor(memories, { bot, chats }))) },
      { id: "compaction", label: "Compaction", render: () => compactionLog(log, bot, store) },
    ],
    { label: "Bot", selected: tab || "settings", onchange: (id) => history.replaceState(null, "", `#/bot/${bot.id}/${id}`) },
  );
  tabset.panel("settings").append(settings);
  tabset.panel("memories").append(memories);
  tabset.panel("compaction").append(log);
  const newChat = async () => {
    try {
      const { chat } = await post("/chats", { bot_id: bot.id });
      await store.refresh();
      go(`#/chat/${chat.id}`);
    } catch (error) {
      toast(error.message, "error");
    }
  };
  const deleteBot = async () => {
    if (!window.confirm(`Delete the bot “${bot.name}” and its chats?`)) return;
    try {
      await del(`/bots/${bot.id}`);
      await store.refresh();
      go("#/bots");
    } catch (error) {
      toast(error.message, "error");
    }
  };
  replace(
    main,
    h(
      "section.page.bot-page",
      h(
        "div.page-head",
        h("h1", bot.name),
        h("div.actions", h("button.primary", { type: "button", onclick: newChat }, "+ New chat"), h("button.danger-outline", { type: "button", onclick: deleteBot }, "Delete bot")),
      ),
      chats.length
        ? h("p.muted", "Chats: ", chats.slice(0, 8).map((c, i) => [i ? ", " : "", h("a", { href: `#/chat/${c.id}` }, chatTitle(c))]), chats.length > 8 ? ` and ${chats.length - 8} more` : "")
        : null,
      !bot.chat_model_id ? h("p.notice", badge("no chat model", "warn"), " Previews work, but generation needs a chat model.") : null,
      tabset.el,
    ),
  );
}
