# attnacc: build fragment of the recipe module.
attnaccinclude_HEADERS += lib/recipe.h
